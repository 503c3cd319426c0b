import type pg from 'pg';
import { FenceLostError } from '../../common/errors.ts';
import type { Fence } from '../../state/schema.ts';

/** A role's working memory (holt.llm_memory): read by every turn, written under a turn's fence. */
export class MemoryStore {
  readonly pool: pg.Pool;
  constructor(pool: pg.Pool) {
    this.pool = pool;
  }

  /** The role's working memory, if it saved any. */
  async memory(instance: string, role: string): Promise<string | undefined> {
    const r = await this.pool.query<{ content: string }>(
      'SELECT content FROM holt.llm_memory WHERE instance = $1 AND role = $2',
      [instance, role],
    );
    return r.rows[0]?.content;
  }

  /**
   * Saves the role's working memory under the turn's fence (one statement: the head must still hold
   * this epoch and turn), so a stale worker cannot overwrite it. FenceLostError, with no write, when stale.
   */
  async setMemory(f: Fence, role: string, content: string): Promise<void> {
    const r = await this.pool.query(
      `INSERT INTO holt.llm_memory (instance, role, content)
       SELECT h.instance, $5::text, $6::text FROM holt.agent_state_head h
       WHERE h.instance = $1 AND h.actor_id = $2 AND h.turn_epoch = $3 AND h.active_turn_id = $4
         AND h.status IN ('running', 'suspended')
       FOR SHARE OF h
       ON CONFLICT (instance, role) DO UPDATE SET content = EXCLUDED.content, updated_at = now()`,
      [f.instance, f.actorId, f.epoch, f.turnId, role, content],
    );
    if (r.rowCount !== 1) throw new FenceLostError();
  }
}
