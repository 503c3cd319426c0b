import { appendFileSync } from 'node:fs';

/** What a test's context offers for skipping (vitest's TestContext). */
export interface SkipContext {
  task: { name: string };
  skip: (note?: string) => never;
}

/**
 * A test that cannot apply to this cluster (it lacks a capability: a second node, an image only the
 * project's own cluster loads) says so, never silently: a line in the output, the reason as vitest's
 * skip note, and a line in `HOLT_E2E_SUMMARY` when set (`make e2e-kind` prints that file at the end).
 */
export function notApplicable(ctx: SkipContext, reason: string): never {
  const line = `NOT APPLICABLE: ${ctx.task.name}: ${reason}`;
  console.log(`[e2e] ${line}`);
  const summary = process.env.HOLT_E2E_SUMMARY;
  if (summary) appendFileSync(summary, `${line}\n`);
  return ctx.skip(reason);
}
