import { createHash } from 'node:crypto';
import type pg from 'pg';
import { z } from 'zod';
import { lifeActorOf } from '../state/ids.ts';
import { StepStore } from '../state/steps.ts';
import { WAIT_COLS, WaitRow } from './reads.ts';

/**
 * A living agent's tasks: what it has running on its behalf beyond a turn, each a handle that can be
 * listed and cancelled (`holt life tasks|cancel`, `GET`/`DELETE /v1/agents/{role}/tasks[/{id}]`):
 * - its waits (a timer, a message, an operator: `holt.agent_waits`);
 * - its suspended turn's asynchronous calls (`holt.turn_waiting_tools`): a NATS request to a tool
 *   service, or a background command its pup runs.
 * Cancelling never loses the turn its report: a wait is marked and ended by the scheduler's next step,
 * which tells the new turn it was cancelled (life/opening.ts); a call gets a cancellation report as its
 * result, so the suspended turn resumes with it, and the pup kills a background command's process
 * group when it sees the call settled (llm/life-turn.ts `reap`).
 */

export const TASK_KINDS = ['timer', 'message', 'operator', 'nats', 'command', 'a2a'] as const;
export type TaskKind = (typeof TASK_KINDS)[number];

export const Task = z.object({
  /** A wait's own id; a call's, derived from its turn and tool call (callTaskId). */
  id: z.string(),
  kind: z.enum(TASK_KINDS),
  /** What it waits on (a wait's reason), or the tool a call runs. */
  what: z.string(),
  /** `cancelling`: cancelled, and the agent has not yet been told (its next step tells it). */
  state: z.enum(['waiting', 'cancelling']),
  deadlineMs: z.number().nullable(),
  createdMs: z.number(),
  itemId: z.string().nullable(),
  turnId: z.string().nullable(),
});
export type Task = z.infer<typeof Task>;

/** A call's task id: a UUID's shape, from its turn and tool call id (unique per turn). */
export function callTaskId(turnId: string, toolCallId: string): string {
  const h = createHash('sha256').update(`${turnId}\0${toolCallId}`).digest('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20, 32)}`;
}

/** What a cancelled call's result says (the turn reads it as a cancellation report, never an answer). */
export const CancelledResult = z.object({
  ok: z.literal(false),
  cancelled: z.literal(true),
  error: z.string(),
});
export type CancelledResult = z.infer<typeof CancelledResult>;

export type Cancelled =
  | { kind: 'cancelled'; task: Task }
  | { kind: 'not_found' }
  | { kind: 'ambiguous'; ids: string[] };

const CallTaskRow = z.object({
  turn_id: z.uuid(),
  tool_call_id: z.string(),
  tool_name: z.string(),
  request: z.unknown(),
  deadline_ms: z.coerce.number().nullable(),
  created_ms: z.coerce.number(),
});

/** The shortest prefix a cancel accepts: shorter ones would match by accident. */
export const MIN_TASK_PREFIX = 6;

export class LifeTasks {
  readonly pool: pg.Pool;
  constructor(pool: pg.Pool) {
    this.pool = pool;
  }

  /** The agent's open tasks, the oldest first. */
  async list(instance: string, role: string): Promise<Task[]> {
    const [waits, calls] = await Promise.all([
      this.pool.query(
        `SELECT ${WAIT_COLS} FROM holt.agent_waits WHERE instance = $1 AND role = $2 AND state = 'waiting'`,
        [instance, role],
      ),
      this.pool.query(
        `SELECT w.turn_id, w.tool_call_id, w.tool_name, w.request,
           (EXTRACT(EPOCH FROM w.resume_deadline) * 1000)::bigint AS deadline_ms,
           (EXTRACT(EPOCH FROM t.created_at) * 1000)::bigint AS created_ms
         FROM holt.turn_waiting_tools w JOIN holt.agent_turns t ON t.turn_id = w.turn_id
         WHERE w.instance = $1 AND w.actor_id = $2 AND w.wait_status = 'waiting'`,
        [instance, lifeActorOf(instance, role)],
      ),
    ]);
    const tasks: Task[] = [
      ...waits.rows.map((x) => {
        const w = WaitRow.parse(x);
        return {
          id: w.id,
          kind: w.kind,
          what: w.on_what,
          state: w.cancelled_by ? ('cancelling' as const) : ('waiting' as const),
          deadlineMs: w.deadline_ms,
          createdMs: w.created_ms,
          itemId: w.item_id,
          turnId: null,
        };
      }),
      ...calls.rows.map((x) => {
        const c = CallTaskRow.parse(x);
        const via = (c.request as { via?: unknown } | null)?.via;
        return {
          id: callTaskId(c.turn_id, c.tool_call_id),
          kind: via === 'nats' ? ('nats' as const) : via === 'a2a' ? ('a2a' as const) : ('command' as const),
          what: c.tool_name,
          state: 'waiting' as const,
          deadlineMs: c.deadline_ms,
          createdMs: c.created_ms,
          itemId: null,
          turnId: c.turn_id,
        };
      }),
    ];
    return tasks.sort((a, b) => a.createdMs - b.createdMs || a.id.localeCompare(b.id));
  }

  /**
   * Cancels one open task by its id or a prefix of it (at least MIN_TASK_PREFIX characters), saying
   * who asked in the audit trail (`holt life show`). The caller rings the agent's doorbell after.
   */
  async cancel(instance: string, role: string, idOrPrefix: string, by: string): Promise<Cancelled> {
    const want = idOrPrefix.toLowerCase();
    if (want.length < MIN_TASK_PREFIX) return { kind: 'not_found' };
    const open = (await this.list(instance, role)).filter((t) => t.id.startsWith(want));
    if (open.length > 1) return { kind: 'ambiguous', ids: open.map((t) => t.id) };
    const task = open[0];
    if (!task) return { kind: 'not_found' };
    const done = task.turnId
      ? await this.#cancelCall(instance, role, task, by)
      : await this.#cancelWait(task.id, by);
    if (!done) return { kind: 'not_found' }; // it ended between the list and now
    await this.pool.query(
      `INSERT INTO holt.life_audit (instance, role, decision, detail) VALUES ($1, $2, 'cancel', $3::jsonb)`,
      [
        instance,
        role,
        JSON.stringify({ why: `${by} cancelled ${task.kind} task ${task.id} (${task.what})`, task: task.id }),
      ],
    );
    return { kind: 'cancelled', task: { ...task, state: 'cancelling' } };
  }

  async #cancelWait(id: string, by: string): Promise<boolean> {
    const r = await this.pool.query(
      `UPDATE holt.agent_waits SET cancelled_by = $2
       WHERE id = $1 AND state = 'waiting' AND cancelled_by IS NULL`,
      [id, by],
    );
    return r.rowCount === 1;
  }

  async #cancelCall(instance: string, role: string, task: Task, by: string): Promise<boolean> {
    const calls = await this.pool.query<{ tool_call_id: string }>(
      `SELECT tool_call_id FROM holt.turn_waiting_tools
       WHERE turn_id = $1 AND actor_id = $2 AND wait_status = 'waiting'`,
      [task.turnId, lifeActorOf(instance, role)],
    );
    const call = calls.rows.find((c) => callTaskId(task.turnId ?? '', c.tool_call_id) === task.id);
    if (!call) return false;
    const result: CancelledResult = { ok: false, cancelled: true, error: `cancelled by ${by}` };
    return new StepStore(this.pool).receiveTool(
      task.turnId ?? '',
      call.tool_call_id,
      result,
      lifeActorOf(instance, role),
    );
  }
}
