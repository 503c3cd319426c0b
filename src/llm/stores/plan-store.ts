import type pg from 'pg';
import { FenceLostError } from '../../common/errors.ts';
import type { Fence } from '../../state/schema.ts';
import type { Plan } from '../turn/plan.ts';
import { Ctl } from '../turn/state.ts';

const PlanS = Ctl.shape.plan.unwrap();

/**
 * A planning agent's plan per goal (holt.llm_plans): read when a turn on the goal starts, written under
 * the turn's fence whenever the plan changes, so the subtasks and how far they got survive across turns
 * and claims of one workflow.
 */
export class PlanStore {
  readonly pool: pg.Pool;
  constructor(pool: pg.Pool) {
    this.pool = pool;
  }

  /** The role's plan for the goal, if a turn made one; a stored plan that no longer parses is none. */
  async load(instance: string, role: string, goalId: string): Promise<Plan | undefined> {
    const r = await this.pool.query<{ plan: unknown }>(
      'SELECT plan FROM holt.llm_plans WHERE instance = $1 AND role = $2 AND goal_id = $3',
      [instance, role, goalId],
    );
    const p = PlanS.safeParse(r.rows[0]?.plan);
    return p.success ? p.data : undefined;
  }

  /** Saves the plan under the turn's fence (one statement); FenceLostError, with no write, when stale. */
  async save(f: Fence, role: string, goalId: string, plan: Plan): Promise<void> {
    const r = await this.pool.query(
      `INSERT INTO holt.llm_plans (instance, role, goal_id, plan)
       SELECT h.instance, $5::text, $6::text, $7::jsonb FROM holt.agent_state_head h
       WHERE h.instance = $1 AND h.actor_id = $2 AND h.turn_epoch = $3 AND h.active_turn_id = $4
         AND h.status IN ('dispatched', 'running', 'suspended')
       FOR SHARE OF h
       ON CONFLICT (instance, role, goal_id) DO UPDATE SET plan = EXCLUDED.plan, updated_at = now()`,
      [f.instance, f.actorId, f.epoch, f.turnId, role, goalId, JSON.stringify(plan)],
    );
    if (r.rowCount !== 1) throw new FenceLostError();
  }
}
