import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/**
 * The CPU weight of the cgroup that holds every pod of the local cluster (containerd's namespace
 * `k8s.io`, both nodes), as a multiple of one host session's.
 *
 * Why: the kernel's autogroup scheduling gives each host session (every daemon started with setsid:
 * etcd, the API server, each kubelet and containerd, each test file's Redis, NATS and Postgres) the
 * weight of one task, and the pods' cgroup the same weight for all of them together. On a busy CI
 * machine some 70 pods then shared a fifteenth of the CPU: probes timed out everywhere, the operator
 * was killed for its liveness probe and lost its lease (stop 40's CI). Measured with a spinning pod
 * beside six busy host sessions: 55 M loop iterations/s at the default weight, 160 M at this one.
 */
export const POD_CPU_WEIGHT_SESSIONS = 8;

/** What to write, and where, for cgroup v1's cpu.shares or v2's cpu.weight; undefined when neither is
 * mounted as expected (a rootless or nested machine keeps the kernel's default). */
export function podCpuWeightFile(
  cgroupRoot = '/sys/fs/cgroup',
): { dir: string; file: string; value: string } | undefined {
  const v1 = join(cgroupRoot, 'cpu');
  if (existsSync(join(v1, 'cpu.shares'))) {
    return { dir: join(v1, 'k8s.io'), file: 'cpu.shares', value: String(1024 * POD_CPU_WEIGHT_SESSIONS) };
  }
  if (existsSync(join(cgroupRoot, 'cgroup.controllers'))) {
    return {
      dir: join(cgroupRoot, 'k8s.io'),
      file: 'cpu.weight',
      value: String(100 * POD_CPU_WEIGHT_SESSIONS),
    };
  }
  return undefined;
}

/** Raises the pods' cgroup weight before containerd creates a container in it. Best effort: a machine
 * that refuses the write keeps the default, and the reason is returned for the caller to print. */
export function weighPodCgroup(cgroupRoot?: string): string | undefined {
  const target = podCpuWeightFile(cgroupRoot);
  if (!target) return 'no cgroup cpu controller found';
  try {
    mkdirSync(target.dir, { recursive: true });
    writeFileSync(join(target.dir, target.file), target.value);
    return undefined;
  } catch (err) {
    return `cannot set ${join(target.dir, target.file)}: ${(err as Error).message}`;
  }
}
