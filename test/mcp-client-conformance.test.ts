import { execFile } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative, resolve } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';

/**
 * The MCP conformance suite (`@modelcontextprotocol/conformance`, all its client scenarios, run in
 * parallel by the suite) against Holt's MCP client: test/harness/mcp-conformance-client.ts connects
 * src/llm/mcp's McpHub to each scenario's server (the URL the suite appends), lists the tools and
 * calls each. The suite's servers listen on localhost; nothing else runs.
 *
 * The scenarios Holt is expected to fail are listed with a reason in mcp-client-conformance-baseline.json;
 * a failure outside it fails this test, and so does an entry that passes (the baseline must stay true).
 * By hand: `npx vitest run test/mcp-client-conformance.test.ts` prints the counts.
 */

const run = promisify(execFile);
const ROOT = resolve(import.meta.dirname, '..');
const SUITE = join(ROOT, 'node_modules', '.bin', 'conformance');
const DRIVER = join(import.meta.dirname, 'harness', 'mcp-conformance-client.ts');
const Baseline = z.object({ client: z.record(z.string(), z.string().min(10)) });
const Check = z.object({
  id: z.string(),
  status: z.string(),
  errorMessage: z.string().optional(),
  details: z.record(z.string(), z.unknown()).optional(),
});

/**
 * sse-retry times the client's reconnection against the server's `retry: 500`: too early is the
 * client's fault (it ignored the field), but "very late" (over 1 s) can be the machine's load alone on
 * a busy CI runner, so it is reported, not judged; reconnecting at all and sending Last-Event-ID are.
 */
const judged = (c: z.infer<typeof Check>) =>
  c.status === 'FAILURE' && !(c.id === 'client-sse-retry-timing' && c.details?.tooEarly === false);

let scratch: string;
beforeAll(() => {
  scratch = mkdtempSync(join(process.env.HOLT_TEST_TMP ?? tmpdir(), 'mcp-client-conformance-'));
});
afterAll(() => {
  if (scratch) rmSync(scratch, { recursive: true, force: true });
});

/** Result folders: `<scenario>-<timestamp>`, the auth ones under auth/. */
function resultDirs(dir: string): string[] {
  return readdirSync(dir).flatMap((d) => {
    const p = join(dir, d);
    if (!statSync(p).isDirectory()) return [];
    return readdirSync(p).includes('checks.json') ? [p] : resultDirs(p);
  });
}

describe('MCP conformance suite, client scenarios, against Holt’s MCP client', () => {
  it('fails exactly the scenarios of the baseline', async () => {
    const out = join(scratch, 'results');
    // It exits 1 when a scenario fails; the results it saved are what is judged. The generous per-scenario
    // timeout only matters on a loaded machine (each scenario takes well under a second here).
    const command = `${process.execPath} ${DRIVER}`;
    await run(SUITE, ['client', '--command', command, '--suite', 'all', '--timeout', '60000', '-o', out], {
      cwd: scratch,
      timeout: 110_000,
    }).catch((e: { code?: number }) => {
      if (typeof e.code !== 'number') throw e;
    });
    const results = resultDirs(out).map((dir) => {
      const m = /^(.+)-\d{4}-\d\d-\d\dT[\d-]+Z$/.exec(relative(out, dir));
      if (!m) throw new Error(`unexpected result folder ${dir}`);
      const checks = z.array(Check).parse(JSON.parse(readFileSync(join(dir, 'checks.json'), 'utf8')));
      const stderr = readFileSync(join(dir, 'stderr.txt'), 'utf8');
      return { scenario: m[1] as string, checks, failures: checks.filter(judged), stderr };
    });
    const baseline = Baseline.parse(
      JSON.parse(readFileSync(join(import.meta.dirname, 'mcp-client-conformance-baseline.json'), 'utf8')),
    );
    const failed = results.filter((r) => r.failures.length);
    const passed = results.filter((r) => !r.failures.length);
    const timing = results.flatMap((r) => r.checks).find((c) => c.id === 'client-sse-retry-timing')
      ?.details?.actualDelayMs;
    process.stderr.write(
      `client conformance: ${results.length} scenarios, ${passed.length} passed, ${failed.length} failed (${failed.filter((f) => f.scenario in baseline.client).length} expected); sse-retry reconnected after ${timing} ms\n`,
    );
    // Every scenario the baseline names ran (a renamed one would otherwise be excused for ever).
    expect(Object.keys(baseline.client).filter((s) => !results.some((r) => r.scenario === s))).toEqual([]);
    // No new failure (with what the suite said), and no baseline entry that now passes.
    expect(
      failed
        .filter((f) => !(f.scenario in baseline.client))
        .map((f) => `${f.scenario}: ${f.failures.map((c) => c.errorMessage ?? c.id).join('; ')}`),
    ).toEqual([]);
    expect(passed.map((p) => p.scenario).filter((s) => s in baseline.client)).toEqual([]);
    // The core passes: handshake, discovery and a call, resuming an SSE stream with Last-Event-ID.
    for (const s of ['initialize', 'tools_call', 'sse-retry'])
      expect(passed.map((p) => p.scenario)).toContain(s);
    // Without OAuth a 401 leaves the server unavailable, classed auth (no SSE fallback, no crash).
    for (const r of results.filter((r) => r.scenario.startsWith('auth/')))
      expect(r.stderr, r.scenario).toMatch(/^unavailable: auth: /m);
  }, 120_000);
});
