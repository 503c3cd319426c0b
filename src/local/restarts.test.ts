import { afterEach, describe, expect, it } from 'vitest';
import { makeTempDir, removeDir } from '../../test/harness/tmp.ts';
import { EXIT_CONFIG } from '../common/config.ts';
import { silentLogger } from '../common/logger.ts';
import { CONFIG_TRIES, CRASHES_PER_HOUR, classifyExit, decideRestart } from './restarts.ts';
import { Supervisor } from './supervisor.ts';

const backoff = (step: number) => 1000 * 2 ** step;

describe('restart decisions (pure)', () => {
  it('a configuration error is retried a few times, then given up with the reason', () => {
    expect(classifyExit(EXIT_CONFIG)).toBe('config');
    expect(classifyExit(1)).toBe('crash');
    expect(classifyExit(null)).toBe('crash');
    const h = { configInRow: 1, crashes: [], backoffStep: 0 };
    expect(decideRestart('config', h, 0, backoff)).toEqual({ restart: true, delayMs: 1000 });
    const d = decideRestart('config', { ...h, configInRow: CONFIG_TRIES }, 0, backoff);
    expect(d).toMatchObject({
      restart: false,
      reason: expect.stringMatching(/configuration error 3 times in a row/),
    });
  });

  it('crashes back off, and stop at the hourly cap; older crashes do not count', () => {
    const now = 10 * 3_600_000;
    const recent = Array.from({ length: CRASHES_PER_HOUR }, (_, i) => now - i * 1000);
    expect(decideRestart('crash', { configInRow: 0, crashes: [], backoffStep: 3 }, now, backoff)).toEqual({
      restart: true,
      delayMs: 8000,
    });
    expect(
      decideRestart('crash', { configInRow: 0, crashes: recent, backoffStep: 0 }, now, backoff),
    ).toMatchObject({
      restart: false,
      reason: expect.stringMatching(/crashed 30 times in the last hour/),
    });
    const old = recent.map((t) => t - 3_600_000);
    expect(
      decideRestart('crash', { configInRow: 0, crashes: old, backoffStep: 0 }, now, backoff).restart,
    ).toBe(true);
  });
});

describe('the local supervisor (real processes)', () => {
  const dirs: string[] = [];
  afterEach(() => {
    for (const d of dirs.splice(0)) removeDir(d);
  });

  it('a component with a bad setting stops after a few tries and says why; a crashing one is restarted', async () => {
    const dir = makeTempDir('sup');
    dirs.push(dir);
    const sup = new Supervisor(dir, silentLogger(), () => undefined);
    const spec = (name: string, code: number) => ({
      name,
      kind: 'agent' as const,
      command: process.execPath,
      args: ['-e', `process.exit(${code})`],
      env: {},
      cwd: dir,
    });
    sup.add(spec('misconfigured', EXIT_CONFIG));
    sup.add(spec('crashy', 1));
    const state = (n: string) => sup.states().find((s) => s.name === n);
    const deadline = Date.now() + 60_000; // only stops a broken test from hanging
    while (state('misconfigured')?.status !== 'failed' && Date.now() < deadline)
      await new Promise((r) => setTimeout(r, 50));
    const mis = state('misconfigured');
    expect(mis?.status).toBe('failed');
    expect(mis?.restarts).toBe(CONFIG_TRIES - 1);
    expect(mis?.lastExit).toMatch(/exit code 78; configuration error 3 times in a row/);
    // The crashing one kept being restarted meanwhile.
    expect(state('crashy')?.restarts).toBeGreaterThan(0);
    expect(state('crashy')?.status).not.toBe('failed');
    await sup.stopAll(1000);
  });
});
