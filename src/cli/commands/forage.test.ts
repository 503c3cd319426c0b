import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, realpathSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeTempDir, removeDir } from '../../../test/harness/tmp.ts';
import { AGENTS } from '../../pup/testkit.ts';
import { workspaceOf } from '../resolve.ts';
import { checkClean, goalTrace } from './forage.ts';

let base: string;
beforeAll(() => {
  base = makeTempDir('forage-plant');
});
afterAll(() => removeDir(base));

describe('the CLI reads a workspace an agent may have planted without running what it planted', () => {
  it('holt forage’s clean check and the workspace lookup: the planted fsmonitor, filter and hooks never run', () => {
    const ws = join(base, 'ws');
    mkdirSync(join(ws, 'sub'), { recursive: true });
    // git-plant.mjs leaves README modified, so the workspace is dirty (and `status` compares it through the filter).
    execFileSync(process.execPath, [join(AGENTS, 'git-plant.mjs'), 'head'], { cwd: ws, input: '' });
    expect(() => checkClean(ws)).toThrow(/Git workspace is not clean[\s\S]*README/);
    expect(workspaceOf(join(ws, 'sub'))).toBe(realpathSync(ws));
    expect(existsSync(join(ws, '.git', 'plant.sh'))).toBe(true);
    expect(existsSync(join(ws, '.git', 'holt-plant-dump'))).toBe(false);
  });
});

describe('the trace a goal continues', () => {
  const tp = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';
  it('--traceparent wins over TRACEPARENT; TRACESTATE goes with TRACEPARENT only; none: the goal starts one', () => {
    expect(goalTrace(tp, { TRACEPARENT: 'ignored', TRACESTATE: 'k=v' })).toEqual({ traceparent: tp });
    expect(goalTrace(undefined, { TRACEPARENT: tp, TRACESTATE: 'k=v' })).toEqual({
      traceparent: tp,
      tracestate: 'k=v',
    });
    expect(goalTrace(undefined, {})).toBeUndefined();
  });
  it('a malformed one is a usage error naming where it came from', () => {
    expect(() => goalTrace('00-xyz', {})).toThrow(/--traceparent: must be a W3C traceparent/);
    expect(() => goalTrace(undefined, { TRACEPARENT: 'nope' })).toThrow(
      /TRACEPARENT: must be a W3C traceparent/,
    );
  });
});
