import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { makeTempDir, removeDir } from '../harness/tmp.ts';
import {
  joinTestCgroup,
  POD_CPU_WEIGHT_SESSIONS,
  podCpuWeightFile,
  TEST_CGROUP,
  weighPodCgroup,
} from './cpu-weight.ts';

// A directory laid out like /sys/fs/cgroup stands in for the real one, which a test must not change.
describe('the pods cgroup weight of the local cluster', () => {
  const dirs: string[] = [];
  const root = () => {
    const d = makeTempDir('cgroup-');
    dirs.push(d);
    return d;
  };
  afterEach(() => {
    for (const d of dirs.splice(0)) removeDir(d);
  });

  it('writes cpu.shares under cgroup v1 and cpu.weight under v2, each worth several host sessions', () => {
    const v1 = root();
    mkdirSync(join(v1, 'cpu'));
    writeFileSync(join(v1, 'cpu', 'cpu.shares'), '1024');
    expect(weighPodCgroup(v1)).toBeUndefined();
    expect(readFileSync(join(v1, 'cpu', 'k8s.io', 'cpu.shares'), 'utf8')).toBe(
      String(1024 * POD_CPU_WEIGHT_SESSIONS),
    );

    const v2 = root();
    writeFileSync(join(v2, 'cgroup.controllers'), 'cpu memory');
    expect(weighPodCgroup(v2)).toBeUndefined();
    expect(readFileSync(join(v2, 'k8s.io', 'cpu.weight'), 'utf8')).toBe(
      String(100 * POD_CPU_WEIGHT_SESSIONS),
    );
    expect(POD_CPU_WEIGHT_SESSIONS).toBeGreaterThan(1);
  });

  it('moves a test run into a cgroup that weighs as much as the pods', () => {
    const v1 = root();
    mkdirSync(join(v1, 'cpu'));
    writeFileSync(join(v1, 'cpu', 'cpu.shares'), '1024');
    expect(joinTestCgroup(4242, v1)).toBeUndefined();
    weighPodCgroup(v1);
    const tests = join(v1, 'cpu', TEST_CGROUP);
    expect(readFileSync(join(tests, 'cgroup.procs'), 'utf8')).toBe('4242');
    expect(readFileSync(join(tests, 'cpu.shares'), 'utf8')).toBe(
      readFileSync(join(v1, 'cpu', 'k8s.io', 'cpu.shares'), 'utf8'),
    );
    expect(joinTestCgroup(4242, root())).toMatch(/no cgroup cpu controller/);
  });

  it('leaves a machine without a cpu controller alone and says why', () => {
    const none = root();
    expect(podCpuWeightFile(none)).toBeUndefined();
    expect(weighPodCgroup(none)).toMatch(/no cgroup cpu controller/);
  });
});
