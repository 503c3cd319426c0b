import { execFile } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { type McpStdioBridge, startMcpStdioBridge } from './harness/mcp-stdio-bridge.ts';

/**
 * The MCP conformance suite (`@modelcontextprotocol/conformance`, its active server scenarios) against
 * `holt mcp` as IDEs run it, on stdio: the suite speaks only Streamable HTTP, so a test-only bridge
 * (test/harness/mcp-stdio-bridge.ts) gives each of its sessions a `holt mcp` process of its own. No Holt
 * runs: the scenarios use the protocol and the suite's reference fixtures, never Holt's data, and a
 * tool that needs the instance answers with a tool error.
 *
 * The scenarios Holt is expected to fail are listed with a reason in mcp-conformance-baseline.json; a
 * failure outside it fails this test, and so does an entry that passes (the baseline must stay true).
 * By hand: `npx vitest run test/mcp-conformance.test.ts` prints the counts.
 */

const run = promisify(execFile);
const ROOT = resolve(import.meta.dirname, '..');
const HOLT = join(ROOT, 'bin', 'holt');
const SUITE = join(ROOT, 'node_modules', '.bin', 'conformance');
const Baseline = z.object({ server: z.record(z.string(), z.string().min(10)) });
const Checks = z.array(z.object({ id: z.string(), status: z.string(), errorMessage: z.string().optional() }));

let scratch: string;
let bridge: McpStdioBridge;

beforeAll(async () => {
  scratch = mkdtempSync(join(process.env.HOLT_TEST_TMP ?? tmpdir(), 'mcp-conformance-'));
  const env = { ...(process.env as Record<string, string>), HOLT_HOME: join(scratch, 'home') };
  bridge = await startMcpStdioBridge({
    command: HOLT,
    args: ['mcp', '--name', 'conformance'],
    cwd: scratch,
    env,
  });
});

afterAll(async () => {
  await bridge?.close();
  if (scratch) rmSync(scratch, { recursive: true, force: true });
});

describe('MCP conformance suite, server scenarios, against holt mcp', () => {
  it('fails exactly the scenarios of the baseline', async () => {
    const out = join(scratch, 'results');
    // It exits 1 when a scenario fails; the results it saved are what is judged.
    await run(SUITE, ['server', '--url', bridge.url, '-o', out], { cwd: scratch, timeout: 280_000 }).catch(
      (e: { stdout?: string; code?: number }) => {
        if (typeof e.code !== 'number') throw e;
      },
    );
    const results = readdirSync(out).map((dir) => {
      const m = /^server-(.+)-\d{4}-\d\d-\d\dT[\d-]+Z$/.exec(dir);
      if (!m) throw new Error(`unexpected result folder ${dir}`);
      const checks = Checks.parse(JSON.parse(readFileSync(join(out, dir, 'checks.json'), 'utf8')));
      const failures = checks.filter((c) => c.status === 'FAILURE');
      return { scenario: m[1] as string, checks: checks.length, failures };
    });
    const baseline = Baseline.parse(
      JSON.parse(readFileSync(join(import.meta.dirname, 'mcp-conformance-baseline.json'), 'utf8')),
    );
    const failed = results.filter((r) => r.failures.length);
    const passed = results.filter((r) => !r.failures.length);
    process.stderr.write(
      `conformance: ${results.length} scenarios, ${passed.length} passed, ${failed.length} failed (${failed.filter((f) => f.scenario in baseline.server).length} expected); ${bridge.sessions()} sessions\n`,
    );
    // Every scenario the baseline names ran (a renamed one would otherwise be excused for ever).
    expect(Object.keys(baseline.server).filter((s) => !results.some((r) => r.scenario === s))).toEqual([]);
    // No new failure (with what the suite said), and no baseline entry that now passes.
    expect(
      failed
        .filter((f) => !(f.scenario in baseline.server))
        .map((f) => `${f.scenario}: ${f.failures.map((c) => c.errorMessage ?? c.id).join('; ')}`),
    ).toEqual([]);
    expect(passed.map((p) => p.scenario).filter((s) => s in baseline.server)).toEqual([]);
    // The core of the protocol passes on holt mcp itself.
    for (const s of [
      'server-initialize',
      'ping',
      'tools-list',
      'tools-call-error',
      'resources-list',
      'logging-set-level',
    ])
      expect(passed.map((p) => p.scenario)).toContain(s);
  }, 300_000);
});
