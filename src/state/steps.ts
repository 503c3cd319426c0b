import type pg from 'pg';
import { z } from 'zod';
import { FenceLostError } from '../common/errors.ts';
import { stepIdOf } from './ids.ts';
import { type Fence, StepInput } from './schema.ts';
import { ms } from './sql.ts';

const StepRow = z.object({
  seq: z.number().int(),
  metadata: z.unknown(),
  tool_call_ids: z.array(z.string()).nullable().catch(null),
});
const WaitRowS = z.object({
  tool_call_id: z.string(),
  tool_name: z.string(),
  wait_status: z.enum(['waiting', 'received', 'applied', 'expired', 'dropped']),
  result: z.unknown(),
  request: z.unknown(),
  deadline_ms: z.coerce.number(),
});
export interface ToolWaitRow {
  toolCallId: string;
  toolName: string;
  status: z.infer<typeof WaitRowS>['wait_status'];
  result: unknown;
  request: unknown;
  deadlineMs: number;
}

/**
 * A turn's steps (holt.agent_steps) and the tool results it waits for (holt.turn_waiting_tools), for
 * every turn whoever runs it: an inbox worker under its row's fence, a standard LLM pup under the lease
 * it took on the actor's head. Every write checks the head's epoch and turn in the same statement, so a
 * stale process writes nothing and learns it from a FenceLostError.
 */
export class StepStore {
  readonly pool: pg.Pool;
  constructor(pool: pg.Pool) {
    this.pool = pool;
  }

  /** The turn's stored steps, in order (what a resumed turn folds). */
  async steps(turnId: string): Promise<{ seq: number; metadata: unknown; toolCallIds: string[] }[]> {
    const r = await this.pool.query(
      'SELECT seq, metadata, tool_call_ids FROM holt.agent_steps WHERE turn_id = $1 ORDER BY seq',
      [turnId],
    );
    return r.rows.map((x) => {
      const s = StepRow.parse(x);
      return { seq: s.seq, metadata: s.metadata, toolCallIds: s.tool_call_ids ?? [] };
    });
  }

  /** Records a step of the turn (LLM usage and cost in metadata, tool call ids); FenceLostError when stale. */
  async recordStep(f: Fence, input: StepInput): Promise<void> {
    const s = StepInput.parse(input);
    const r = await this.pool.query(
      `INSERT INTO holt.agent_steps (step_id, instance, actor_id, turn_id, turn_epoch, seq, kind, status,
         tool_call_ids, metadata, error, ended_at)
       SELECT $1::uuid, h.instance, h.actor_id, $4::uuid, h.turn_epoch, $5::int, $6::text, $7::text,
              $8::jsonb, $9::jsonb, $10::text, CASE WHEN $7::text = 'started' THEN NULL ELSE now() END
       FROM holt.agent_state_head h
       WHERE h.instance = $2 AND h.actor_id = $3 AND h.turn_epoch = $11 AND h.active_turn_id = $4
         AND h.status IN ('dispatched', 'running', 'suspended')
       FOR SHARE OF h
       ON CONFLICT (step_id) DO UPDATE SET turn_epoch = EXCLUDED.turn_epoch, status = EXCLUDED.status,
         tool_call_ids = EXCLUDED.tool_call_ids, metadata = EXCLUDED.metadata, error = EXCLUDED.error,
         ended_at = EXCLUDED.ended_at
       WHERE holt.agent_steps.turn_epoch <= EXCLUDED.turn_epoch`,
      [
        stepIdOf(f.turnId, s.seq),
        f.instance,
        f.actorId,
        f.turnId,
        s.seq,
        s.kind,
        s.status,
        JSON.stringify(s.toolCallIds),
        JSON.stringify(s.metadata),
        s.error ?? null,
        f.epoch,
      ],
    );
    if (r.rowCount !== 1) throw new FenceLostError('fence lost: step not recorded');
  }

  /**
   * Records that the turn waits for an asynchronous tool call's result until a deadline (what it asked
   * kept in `request`); FenceLostError when stale. Recording it twice is a no-op.
   */
  async waitTool(
    f: Fence,
    w: { toolCallId: string; toolName: string; seq?: number; resumeDeadlineMs?: number; request?: unknown },
  ): Promise<void> {
    const r = await this.pool.query(
      `INSERT INTO holt.turn_waiting_tools (instance, actor_id, turn_id, turn_epoch, tool_call_id, step_id,
         tool_name, resume_deadline, request)
       SELECT h.instance, h.actor_id, $3::uuid, h.turn_epoch, $5::text, $6::uuid, $7::text,
              now() + $8::interval, $9::jsonb
       FROM holt.agent_state_head h
       WHERE h.instance = $1 AND h.actor_id = $2 AND h.turn_epoch = $4 AND h.active_turn_id = $3
         AND h.status IN ('dispatched', 'running', 'suspended')
       FOR SHARE OF h
       ON CONFLICT (turn_id, tool_call_id) DO NOTHING`,
      [
        f.instance,
        f.actorId,
        f.turnId,
        f.epoch,
        w.toolCallId,
        w.seq === undefined ? null : stepIdOf(f.turnId, w.seq),
        w.toolName,
        ms(w.resumeDeadlineMs ?? 30_000),
        JSON.stringify(w.request ?? null),
      ],
    );
    if (r.rowCount === 1) return;
    // Already recorded (a resumed turn asking again) counts, as long as the fence holds.
    const again = await this.pool.query(
      `SELECT 1 FROM holt.turn_waiting_tools t JOIN holt.agent_state_head h
         ON h.instance = $1 AND h.actor_id = $2 AND h.turn_epoch = $4 AND h.active_turn_id = $3
       WHERE t.turn_id = $3 AND t.tool_call_id = $5`,
      [f.instance, f.actorId, f.turnId, f.epoch, w.toolCallId],
    );
    if (again.rowCount !== 1) throw new FenceLostError('fence lost: tool wait not recorded');
  }

  /** The turn's asynchronous calls and where each stands (received ones carry their result). */
  async toolWaits(turnId: string): Promise<ToolWaitRow[]> {
    const r = await this.pool.query(
      `SELECT tool_call_id, tool_name, wait_status, result, request,
         (EXTRACT(EPOCH FROM resume_deadline) * 1000)::bigint AS deadline_ms
       FROM holt.turn_waiting_tools WHERE turn_id = $1`,
      [turnId],
    );
    return r.rows.map((x) => {
      const w = WaitRowS.parse(x);
      return {
        toolCallId: w.tool_call_id,
        toolName: w.tool_name,
        status: w.wait_status,
        result: w.result,
        request: w.request,
        deadlineMs: w.deadline_ms,
      };
    });
  }

  /** Marks a received result applied (or a waiting call expired) under the turn's fence; FenceLostError when stale. */
  async settleTool(f: Fence, toolCallId: string, status: 'applied' | 'expired'): Promise<void> {
    const r = await this.pool.query(
      `WITH h AS (SELECT 1 FROM holt.agent_state_head WHERE instance = $1 AND actor_id = $2 AND turn_epoch = $3
           AND active_turn_id = $4 AND status IN ('dispatched', 'running', 'suspended') FOR SHARE)
       UPDATE holt.turn_waiting_tools SET wait_status = $6,
         applied_at = CASE WHEN $6 = 'applied' THEN now() ELSE applied_at END
       FROM h WHERE turn_id = $4 AND tool_call_id = $5 RETURNING 1`,
      [f.instance, f.actorId, f.epoch, f.turnId, toolCallId, status],
    );
    if (r.rowCount !== 1) throw new FenceLostError('fence lost: tool wait not settled');
  }

  /**
   * Delivers a tool result: single winner on the waiting row; a duplicate, or a result for a call of
   * another actor than `actorId` (when given), returns false.
   */
  async receiveTool(turnId: string, toolCallId: string, result: unknown, actorId?: string): Promise<boolean> {
    const r = await this.pool.query(
      `UPDATE holt.turn_waiting_tools SET wait_status = 'received', result = $3::jsonb, received_at = now()
       WHERE turn_id = $1 AND tool_call_id = $2 AND wait_status = 'waiting'
         AND ($4::uuid IS NULL OR actor_id = $4::uuid)`,
      [turnId, toolCallId, JSON.stringify(result ?? null), actorId ?? null],
    );
    return r.rowCount === 1;
  }
}
