import type pg from 'pg';
import { z } from 'zod';
import { stepIdOf } from './ids.ts';
import { type Fence, StepInput } from './schema.ts';
import { ms } from './sql.ts';

const StepRow = z.object({ seq: z.number().int(), metadata: z.unknown() });

/**
 * A turn's steps (holt.agent_steps) and the tool results it waits for (holt.turn_waiting_tools), for
 * every turn whoever runs it: an inbox worker under its row's fence, a standard LLM pup under the lease
 * it took on the actor's head. Every write checks the head's epoch and turn in the same statement, so a
 * stale process writes nothing and learns it from a false.
 */
export class StepStore {
  readonly pool: pg.Pool;
  constructor(pool: pg.Pool) {
    this.pool = pool;
  }

  /** The turn's stored steps, in order (what a resumed turn folds). */
  async steps(turnId: string): Promise<{ seq: number; metadata: unknown }[]> {
    const r = await this.pool.query(
      'SELECT seq, metadata FROM holt.agent_steps WHERE turn_id = $1 ORDER BY seq',
      [turnId],
    );
    return r.rows.map((x) => StepRow.parse(x));
  }

  /** Records a step of the turn (LLM usage and cost in metadata, tool call ids); false when stale. */
  async recordStep(f: Fence, input: StepInput): Promise<boolean> {
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
    return r.rowCount === 1;
  }

  /** Records that the turn waits for a tool call's result; false when stale. */
  async waitTool(
    f: Fence,
    w: { toolCallId: string; toolName: string; seq?: number; resumeDeadlineMs?: number },
  ): Promise<boolean> {
    const r = await this.pool.query(
      `INSERT INTO holt.turn_waiting_tools (instance, actor_id, turn_id, turn_epoch, tool_call_id, step_id,
         tool_name, resume_deadline)
       SELECT h.instance, h.actor_id, $3::uuid, h.turn_epoch, $5::text, $6::uuid, $7::text,
              now() + $8::interval
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
      ],
    );
    return r.rowCount === 1;
  }

  /** Delivers a tool result: single winner on the waiting row; a duplicate returns false. */
  async receiveTool(turnId: string, toolCallId: string, result: unknown): Promise<boolean> {
    const r = await this.pool.query(
      `UPDATE holt.turn_waiting_tools SET wait_status = 'received', result = $3::jsonb, received_at = now()
       WHERE turn_id = $1 AND tool_call_id = $2 AND wait_status = 'waiting'`,
      [turnId, toolCallId, JSON.stringify(result ?? null)],
    );
    return r.rowCount === 1;
  }
}
