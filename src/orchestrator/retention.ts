import { Counter, type Registry } from 'prom-client';
import type { Blackboard } from '../blackboard/client.ts';
import { pruneBlackboard } from '../blackboard/retention.ts';
import {
  addCounts,
  NO_PRUNE,
  type PrunedCounts,
  type RetentionReport,
  readRetentionReport,
  writeRetentionReport,
} from '../blackboard/retention-report.ts';
import { errorMessage } from '../common/errors.ts';
import type { Logger } from '../common/logger.ts';

const DAY_MS = 86_400_000;

/** Postgres's share of a pass (the inbox's pruneFinished), when the orchestrator has an inbox. */
export type PostgresPrune = (olderThanMs: number) => Promise<{ turns: number; rows: number; usage: number }>;

export interface RetentionDeps {
  bb: Blackboard;
  isLeader: () => boolean;
  log: Logger;
  /** 0 keeps everything (no pass runs, the report says so). */
  days: number;
  sweepMs: number;
  postgres?: PostgresPrune;
  registry?: Registry;
  /** The clock (tests move it forward instead of waiting days). */
  now?: () => number;
}

export interface Retention {
  /** One pass now (the loop's, exposed for tests); null on a standby or with retention off. */
  pass(): Promise<RetentionReport | null>;
  stop(): void;
}

/**
 * The leader's retention loop: a pass soon after start and then every `sweepMs` removes finished
 * work older than `days` from Redis (whole workflows) and Postgres (turns, inbox rows, usage), and
 * publishes what it did (`holt:{i}:retention`), which `holt status` and the Holt's status show.
 * A failed pass is reported and retried at the next one; it never stops the orchestrator.
 */
export function startRetention(d: RetentionDeps): Retention {
  const pruned = new Counter({
    name: 'holt_orchestrator_retention_pruned_total',
    help: 'Finished work removed by retention, by what (workflows, artefacts, claims, turns, inbox_rows, usage_rows)',
    labelNames: ['what'],
    registers: d.registry ? [d.registry] : [],
  });
  let offset = 0;
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;

  const pass = async (): Promise<RetentionReport | null> => {
    if (d.days <= 0 || !d.isLeader()) return null;
    const now = d.now ?? Date.now;
    const t0 = now();
    const olderThanMs = d.days * DAY_MS;
    const last: PrunedCounts = { ...NO_PRUNE };
    let kept: Record<string, number> = {};
    let error: string | undefined;
    try {
      const r = await pruneBlackboard(d.bb, { olderThanMs, offset, now: t0 });
      offset = r.nextOffset;
      Object.assign(last, { workflows: r.workflows, artefacts: r.artefacts, claims: r.claims });
      kept = Object.fromEntries(Object.entries(r.kept).filter(([, v]) => v > 0));
      if (d.postgres) {
        const p = await d.postgres(olderThanMs);
        Object.assign(last, { turns: p.turns, inbox_rows: p.rows, usage_rows: p.usage });
      }
    } catch (e) {
      error = errorMessage(e);
      d.log.warn({ event_type: 'retention_error', error }, 'retention pass failed; the next pass retries');
    }
    for (const [what, v] of Object.entries(last)) if (v) pruned.inc({ what }, v);
    const prev = await readRetentionReport(d.bb.redis, d.bb.k.retention).catch(() => null);
    const report: RetentionReport = {
      days: d.days,
      last_pass_ms: t0,
      duration_ms: Math.max(0, now() - t0),
      last,
      total: addCounts(prev?.total ?? NO_PRUNE, last),
      kept,
      ...(error ? { error: error.slice(0, 500) } : {}),
    };
    if (Object.values(last).some((v) => v > 0))
      d.log.info({
        event_type: 'retention_pruned',
        older_than_days: d.days,
        ...last,
        kept,
        duration_ms: report.duration_ms,
      });
    // The report is for people: a pass that cannot write it has still done its work.
    await writeRetentionReport(d.bb.redis, d.bb.k.retention, report).catch(() => undefined);
    return report;
  };

  const loop = (delay: number) => {
    if (stopped) return;
    timer = setTimeout(
      () =>
        void pass()
          .catch(() => null)
          .finally(() => loop(d.sweepMs)),
      delay,
    );
    timer.unref();
  };
  if (d.days > 0) loop(Math.min(d.sweepMs, 60_000));
  return {
    pass,
    stop() {
      stopped = true;
      clearTimeout(timer);
    },
  };
}
