import { existsSync, readFileSync } from 'node:fs';

/**
 * Every tool run of a drill, counted per call (HOLT_CALL_ID: the grant's output id, one per claim and
 * role), and each repeated run classified. A run repeated is by design only in the windows
 * docs/security.md names ("Tools run more than once") and docs/resilience.md lists; anything else is
 * an unexpected duplicate, and the drills assert there are none.
 */

/** One line the drill's tool appends as it starts: its HOLT_CALL_ID and its parent (the pup's pid). */
export interface ToolRun {
  callId: string;
  pid: number;
}

/** A process that ran tools: its pid, its log, whether the drill SIGKILLed it. */
export interface ProcessRecord {
  pid: number;
  logFile: string;
  killed: boolean;
  /** An inbox worker: its result is stored by the worker's fenced commit, not when the executor logs it. */
  worker: boolean;
}

export type ByDesignReason =
  /** The process that ran the tool was killed before it stored the result (a new process runs it again). */
  | 'killed_before_stored'
  /**
   * Storing the result failed (a store down between the tool and its result: the commit rolled back,
   * the row's attempt failed or its lease was lost) and the grant was retried.
   */
  | 'store_failed'
  /** The stored result was lost (Redis restored from an older snapshot) and the grant was reopened. */
  | 'output_lost';

export interface RunCount {
  /** Tool runs in all, and calls (claim, role) that ran at least once. */
  runs: number;
  calls: number;
  /** Runs beyond the first of a call whose earlier run a by-design window explains, by reason. */
  dupRunsByDesign: number;
  byDesign: Partial<Record<ByDesignReason, number>>;
  /** Runs beyond the first of a call that nothing explains: must be 0. */
  dupRunsUnexpected: number;
  /** The calls with unexpected runs (for the failure message). */
  unexpected: { callId: string; runs: number; pids: number[]; log: string[] }[];
}

/** The runs the tool logged: `<call id> <ppid>` per line, in the order they started. */
export function readRuns(file: string): ToolRun[] {
  if (!existsSync(file)) return [];
  return readFileSync(file, 'utf8')
    .split('\n')
    .filter((l) => l.trim())
    .map((l) => {
      const [callId = '', pid = ''] = l.trim().split(/\s+/);
      return { callId, pid: Number(pid) };
    });
}

type Line = Record<string, unknown>;

/** A process's JSON log lines (a line cut short by a SIGKILL is skipped). */
function logOf(p: ProcessRecord | undefined): Line[] {
  if (!p || !existsSync(p.logFile)) return [];
  return readFileSync(p.logFile, 'utf8')
    .split('\n')
    .flatMap((l) => {
      try {
        const v: unknown = JSON.parse(l);
        return v && typeof v === 'object' ? [v as Line] : [];
      } catch {
        return [];
      }
    });
}

/**
 * A worker's attempt that ended without its result stored, so the row runs again: one
 * inbox_claim_finished line per attempt (retry: the run or its commit failed; stale: the lease was
 * lost; released: given back), or worker_error when even recording the failure failed (Postgres down).
 */
const NOT_STORED = new Set(['retry', 'stale', 'released']);

/** What every process logged, indexed for the classification. */
class Logs {
  private readonly lines = new Map<number, Line[]>();
  /** inbox row → claim, call id → claim: from any line that names both. */
  private readonly claimOfRow = new Map<string, string>();
  private readonly claimOfCall = new Map<string, string>();
  constructor(processes: ProcessRecord[]) {
    for (const p of processes) {
      const ls = logOf(p);
      this.lines.set(p.pid, ls);
      for (const l of ls) {
        if (typeof l.claim_id !== 'string') continue;
        if (typeof l.inbox_id === 'string') this.claimOfRow.set(l.inbox_id, l.claim_id);
        if (typeof l.output_id === 'string') this.claimOfCall.set(l.output_id, l.claim_id);
      }
    }
  }

  /** Whether `p` stored the result of `callId`: the worker's row done, or a pup's artefact_created. */
  stored(p: ProcessRecord, callId: string): boolean {
    const claim = this.claimOfCall.get(callId);
    return (this.lines.get(p.pid) ?? []).some((l) =>
      p.worker
        ? l.event_type === 'inbox_claim_finished' && l.claim_id === claim && l.outcome === 'done'
        : l.event_type === 'artefact_created' && l.output_id === callId,
    );
  }

  /** How many times `p` logged that a result of `callId` was not stored (each explains one re-run). */
  storeFailures(p: ProcessRecord, callId: string): number {
    const claim = this.claimOfCall.get(callId);
    const ofClaim = (l: Line) =>
      claim !== undefined && typeof l.inbox_id === 'string' && this.claimOfRow.get(l.inbox_id) === claim;
    return (this.lines.get(p.pid) ?? []).filter((l) =>
      p.worker
        ? (l.event_type === 'inbox_claim_finished' && NOT_STORED.has(String(l.outcome)) && ofClaim(l)) ||
          (l.event_type === 'worker_error' && ofClaim(l))
        : l.event_type === 'execution_error' && l.output_id === callId,
    ).length;
  }

  /** The processes that logged starting `callId`'s tool. */
  starters(callId: string): number[] {
    return [...this.lines].flatMap(([pid, ls]) =>
      ls.some((l) => l.event_type === 'tool_started' && l.output_id === callId) ? [pid] : [],
    );
  }

  /** What `p` logged about `callId` (event and error), for a failure message. */
  about(p: ProcessRecord | undefined, callId: string): string[] {
    if (!p) return [];
    const claim = this.claimOfCall.get(callId);
    return (this.lines.get(p.pid) ?? [])
      .filter(
        (l) =>
          l.output_id === callId ||
          (claim !== undefined &&
            (l.claim_id === claim || this.claimOfRow.get(String(l.inbox_id)) === claim)),
      )
      .map((l) => `${p.pid} ${String(l.event_type)}${l.error ? `: ${String(l.error).slice(0, 160)}` : ''}`);
  }
}

/**
 * Classifies every repeated run. For a call run n times, each of its first n−1 runs is looked at:
 * its process was killed and never logged the result stored → killed_before_stored; else its process
 * logged a failure to store that call's result (one per re-run) → store_failed; else a reopen of
 * that call (grant_reopened, its output lost) is spent → output_lost; else the run is unexpected.
 * `reopened` maps call id → grant_reopened events heard for it.
 */
export function countRuns(
  runs: ToolRun[],
  processes: ProcessRecord[],
  reopened: ReadonlyMap<string, number>,
): RunCount {
  const byPid = new Map(processes.map((p) => [p.pid, p]));
  const logs = new Logs(processes);
  const failures = new Map<number, number>(); // store failures not yet spent, per pid, for this call
  const byCall = new Map<string, ToolRun[]>();
  for (const r of runs) byCall.set(r.callId, [...(byCall.get(r.callId) ?? []), r]);
  // A tool whose pup died before the tool's first line sees itself adopted (its parent is pid 1, or a
  // subreaper): its pup is the one that logged starting this call and ran no other run of it.
  for (const [callId, rs] of byCall) {
    const orphans = rs.filter((r) => !byPid.has(r.pid));
    if (!orphans.length) continue;
    const known = new Set(rs.filter((r) => byPid.has(r.pid)).map((r) => r.pid));
    const spare = logs.starters(callId).filter((pid) => !known.has(pid));
    byCall.set(
      callId,
      rs.map((r) => (byPid.has(r.pid) ? r : { ...r, pid: spare.shift() ?? r.pid })),
    );
  }
  const out: RunCount = {
    runs: runs.length,
    calls: byCall.size,
    dupRunsByDesign: 0,
    byDesign: {},
    dupRunsUnexpected: 0,
    unexpected: [],
  };
  for (const [callId, rs] of byCall) {
    let reopens = reopened.get(callId) ?? 0;
    let unexpected = 0;
    failures.clear();
    for (const p of processes) failures.set(p.pid, logs.storeFailures(p, callId));
    for (const r of rs.slice(0, -1)) {
      const p = byPid.get(r.pid);
      let reason: ByDesignReason | undefined;
      if (p?.killed && !logs.stored(p, callId)) reason = 'killed_before_stored';
      else if (p && (failures.get(p.pid) ?? 0) > 0) {
        failures.set(p.pid, (failures.get(p.pid) ?? 0) - 1);
        reason = 'store_failed';
      } else if (reopens > 0) {
        reopens--;
        reason = 'output_lost';
      }
      if (reason) {
        out.dupRunsByDesign++;
        out.byDesign[reason] = (out.byDesign[reason] ?? 0) + 1;
      } else unexpected++;
    }
    if (unexpected) {
      out.dupRunsUnexpected += unexpected;
      out.unexpected.push({
        callId,
        runs: rs.length,
        pids: rs.map((r) => r.pid),
        log: [...new Set(rs.map((r) => r.pid))].flatMap((pid) => logs.about(byPid.get(pid), callId)),
      });
    }
  }
  return out;
}
