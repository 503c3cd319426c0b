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

/** The cgroup a test run joins (see `joinTestCgroup`). */
export const TEST_CGROUP = 'holt-tests';

export interface CpuWeightFile {
  dir: string;
  file: string;
  value: string;
}

/** What to write, and where, to give cgroup `group` the weight of `sessions` host sessions: cgroup v1's
 * cpu.shares or v2's cpu.weight; undefined when neither is mounted as expected (a rootless or nested
 * machine keeps the kernel's default). */
export function cpuWeightFile(
  group: string,
  sessions: number,
  cgroupRoot = '/sys/fs/cgroup',
): CpuWeightFile | undefined {
  const v1 = join(cgroupRoot, 'cpu');
  if (existsSync(join(v1, 'cpu.shares')))
    return { dir: join(v1, group), file: 'cpu.shares', value: String(1024 * sessions) };
  if (existsSync(join(cgroupRoot, 'cgroup.controllers')))
    return { dir: join(cgroupRoot, group), file: 'cpu.weight', value: String(100 * sessions) };
  return undefined;
}

/** Where the pods' weight goes. */
export function podCpuWeightFile(cgroupRoot?: string): CpuWeightFile | undefined {
  return cpuWeightFile('k8s.io', POD_CPU_WEIGHT_SESSIONS, cgroupRoot);
}

/** Writes a weight, creating its cgroup. Best effort: the reason it could not is returned. */
function weigh(target: CpuWeightFile | undefined): string | undefined {
  if (!target) return 'no cgroup cpu controller found';
  try {
    mkdirSync(target.dir, { recursive: true });
    writeFileSync(join(target.dir, target.file), target.value);
    return undefined;
  } catch (err) {
    return `cannot set ${join(target.dir, target.file)}: ${(err as Error).message}`;
  }
}

/** Raises the pods' cgroup weight before containerd creates a container in it. Best effort: a machine
 * that refuses the write keeps the default, and the reason is returned for the caller to print. */
export function weighPodCgroup(cgroupRoot?: string): string | undefined {
  return weigh(podCpuWeightFile(cgroupRoot));
}

/**
 * Moves a test run (the process `pid`, and so every process it starts later) into a cgroup that weighs
 * as much as the pods'. Why: with the pods at 8 sessions, a `holt up` of a host test (a session of its
 * own) got a tenth of the CPU beside a busy cluster and its six components were not healthy in 60 s
 * (stop 41's CI). Inside a cgroup other than the root, the kernel's autogroup no longer applies: the
 * tests' processes, setsid or not, share their half per task, and the pods the other half.
 */
export function joinTestCgroup(pid = process.pid, cgroupRoot?: string): string | undefined {
  const target = cpuWeightFile(TEST_CGROUP, POD_CPU_WEIGHT_SESSIONS, cgroupRoot);
  const unweighed = weigh(target);
  if (unweighed || !target) return unweighed;
  try {
    writeFileSync(join(target.dir, 'cgroup.procs'), String(pid));
    return undefined;
  } catch (err) {
    return `cannot join ${target.dir}: ${(err as Error).message}`;
  }
}
