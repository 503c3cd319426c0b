import type pg from 'pg';

/**
 * An agent's view of itself (the VSM-aligned self-audit): how often its recent turns succeeded,
 * whether it keeps failing or repeating itself, and how long since it last got anywhere. The figures
 * come from its stored turns; the decisions over them are pure. A turn opens with a forced pivot when
 * the agent is stuck or looping, and, when asked for, a strategic review every N turns or when stuck.
 */

export interface SelfAudit {
  /** Share of the window's finished turns that ended done (null before the first). */
  success_rate: number | null;
  /** Finished turns in the window. */
  turns: number;
  /** Failed turns since the last one that succeeded. */
  failures_in_row: number;
  /** Turns blocked by the loop guard for repeating an action, in the window. */
  loops: number;
  /** Turns since the last one that produced something. */
  turns_since_progress: number;
  stuck: boolean;
  looping: boolean;
  /** Turns the agent has finished in all (what "every N turns" counts). */
  total_turns: number;
}

/** How many finished turns the success rate looks at. */
export const AUDIT_WINDOW = 20;
/** Failed turns in a row that make an agent stuck. */
export const STUCK_AFTER_FAILURES = 3;
/** Turns the loop guard blocked, in the window, that make an agent looping. */
export const LOOPING_AFTER = 2;

export interface FinishedTurn {
  status: 'done' | 'failed';
  /** The loop guard blocked a repeated action in it. */
  looped: boolean;
}

/** The audit of a window of finished turns, newest first. Pure. */
export function auditOf(recent: readonly FinishedTurn[], totalTurns: number): SelfAudit {
  const window = recent.slice(0, AUDIT_WINDOW);
  const done = window.filter((t) => t.status === 'done').length;
  let failuresInRow = 0;
  for (const t of window) {
    if (t.status === 'done') break;
    failuresInRow++;
  }
  const sinceProgress = window.findIndex((t) => t.status === 'done' && !t.looped);
  const loops = window.filter((t) => t.looped).length;
  return {
    success_rate: window.length ? Math.round((done / window.length) * 100) / 100 : null,
    turns: window.length,
    failures_in_row: failuresInRow,
    loops,
    turns_since_progress: sinceProgress < 0 ? window.length : sinceProgress,
    stuck: failuresInRow >= STUCK_AFTER_FAILURES,
    looping: loops >= LOOPING_AFTER,
    total_turns: totalTurns,
  };
}

/** Whether this turn opens with a strategic review: every `every` turns, or when stuck or looping. */
export function reviewDue(a: SelfAudit, every: number | undefined): boolean {
  if (!every) return false;
  return a.stuck || a.looping || (a.total_turns > 0 && a.total_turns % every === 0);
}

/** The runtime's words that force a change of approach on a stuck or looping agent; none otherwise. */
export function pivotMessage(a: SelfAudit): string | undefined {
  if (!a.stuck && !a.looping) return undefined;
  const why = [
    a.stuck ? `your last ${a.failures_in_row} turns failed` : '',
    a.looping ? `${a.loops} of your recent turns were stopped for repeating the same action` : '',
  ]
    .filter(Boolean)
    .join(', and ');
  return `Self-audit (the runtime's): ${why} (success rate ${a.success_rate ?? 'unknown'} over ${a.turns} turns). What you have been doing is not working: do not repeat it. Change your approach before you act: say in one sentence what you will do differently, then do that.`;
}

/**
 * The agent's finished turns, newest first (the window), whether the loop guard blocked a call in
 * each (a `blocked` tool step), and how many it has finished in all.
 */
export async function readAudit(pool: pg.Pool, instance: string, role: string): Promise<SelfAudit> {
  const r = await pool.query<{ status: 'done' | 'failed'; looped: boolean; total: string }>(
    `SELECT t.status, EXISTS (SELECT 1 FROM holt.agent_steps s WHERE s.turn_id = t.turn_id
              AND s.metadata->>'outcome' = 'blocked') AS looped,
            count(*) OVER () AS total
       FROM holt.agent_turns t
      WHERE t.instance = $1 AND t.role = $2 AND t.status IN ('done', 'failed')
      ORDER BY t.ended_at DESC NULLS LAST LIMIT $3`,
    [instance, role, AUDIT_WINDOW],
  );
  // The window function counts before the LIMIT: every finished turn of the agent.
  return auditOf(
    r.rows.map((x) => ({ status: x.status, looped: x.looped })),
    Number(r.rows[0]?.total ?? 0),
  );
}
