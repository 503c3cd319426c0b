import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { makeTempDir, removeDir } from '../harness/tmp.ts';
import { POD_CPU_WEIGHT_SESSIONS, podCpuWeightFile, weighPodCgroup } from './cpu-weight.ts';

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

  it('leaves a machine without a cpu controller alone and says why', () => {
    const none = root();
    expect(podCpuWeightFile(none)).toBeUndefined();
    expect(weighPodCgroup(none)).toMatch(/no cgroup cpu controller/);
  });
});
