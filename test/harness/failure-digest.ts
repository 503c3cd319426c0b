import type { Reporter, SerializedError, TestModule } from 'vitest/node';
import { keptLogsDir } from '../../e2e/cluster/keep-logs.ts';

/**
 * The first and last lines of an error, without colour codes: enough to know what broke (a server that
 * died puts its log's tail, whose last line is the reason, after the first line).
 */
function gist(e: SerializedError | undefined): string {
  // biome-ignore lint/suspicious/noControlCharactersInRegex: strips ANSI colour codes
  const plain = (v: unknown) => String(v ?? '').replace(/\x1b\[[0-9;]*m/g, '');
  const lines = plain(e?.message ?? e).split('\n');
  const kept = lines.length <= 8 ? lines : [...lines.slice(0, 3), '…', ...lines.slice(-4)];
  const text = kept.join('\n    ').slice(0, 2000);
  // An assertion's message cuts long values short ('abc…'): its expected and actual, whole (to a point).
  const whole = (v: unknown) => plain(v).replace(/\s+/g, ' ').slice(0, 400);
  const x = e as { expected?: unknown; actual?: unknown } | undefined;
  return x?.expected !== undefined && x.actual !== undefined
    ? `${text}\n    expected: ${whole(x.expected)}\n    actual:   ${whole(x.actual)}`
    : text;
}

/**
 * After vitest's own summary, one line per failed test with the start of its error. CI keeps only the
 * tail of a run's output, where the default reporter's summary names no test; this digest puts every
 * failure there, so a failed run says what failed without its whole log.
 */
export default class FailureDigest implements Reporter {
  onTestRunEnd(modules: ReadonlyArray<TestModule>, unhandled: ReadonlyArray<SerializedError>): void {
    const lines: string[] = [];
    for (const m of modules) {
      for (const e of m.errors()) lines.push(`${m.relativeModuleId} (the file): ${gist(e)}`);
      for (const t of m.children.allTests('failed')) {
        lines.push(`${m.relativeModuleId} > ${t.fullName}: ${gist(t.result().errors?.[0])}`);
      }
    }
    for (const e of unhandled) lines.push(`unhandled: ${gist(e)}`);
    if (lines.length === 0) return;
    // The cluster e2e's logs outlive the run (e2e/cluster/keep-logs.ts): say where.
    if (lines.some((l) => l.startsWith('e2e/cluster.test.ts')))
      lines.push(`the real cluster's logs of this run: ${keptLogsDir()}/{before-teardown,end}`);
    process.stdout.write(`\nFailed (${lines.length}):\n${lines.map((l) => `  - ${l}`).join('\n')}\n`);
  }
}
