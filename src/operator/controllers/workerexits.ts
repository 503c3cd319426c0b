import { CoreV1Api } from '@kubernetes/client-node';
import type { WorkerExit } from '../../blackboard/worker-exits.ts';
import { errorMessage } from '../../common/errors.ts';
import type { Logger } from '../../common/logger.ts';
import type { InformerEvent } from '../kube/informer.ts';
import type { KubeClient, KubeObject } from '../kube/kube.ts';
import type { HoltRef } from './registry.ts';

/** The container whose death loses the claim (the pup holds the lease; the tools only its runs). */
const PUP = 'pup';

interface Terminated {
  exitCode?: number;
  signal?: number;
  reason?: string;
  finishedAt?: string;
}
interface ContainerStatus {
  name?: string;
  state?: { terminated?: Terminated };
  lastState?: { terminated?: Terminated };
}

/** One death of a worker pod's pup, as the pod's status shows it. */
export interface PodDeath {
  /** Unique per death: pod uid, finish time and code (a status seen twice gives the same key). */
  key: string;
  holt: HoltRef;
  exit: Omit<WorkerExit, 'logs'>;
  /** The log of the dead run is the previous one (the container was restarted since). */
  previous: boolean;
  /** When the run ended, as the kubelet wrote it: names the run among the pod's later statuses. */
  finishedAt: string;
}

/** The pup's non-zero exits a pod's status shows (its current state and the one before). Pure. */
export function podDeaths(pod: KubeObject): PodDeath[] {
  const labels = pod.metadata.labels ?? {};
  const holt = labels['holt.io/instance'];
  const role = labels['holt.io/role'];
  const statuses = ((pod as { status?: { containerStatuses?: ContainerStatus[] } }).status
    ?.containerStatuses ?? []) as ContainerStatus[];
  const pup = statuses.find((c) => c.name === PUP);
  if (!holt || !role || !pup) return [];
  const out: PodDeath[] = [];
  for (const [t, previous] of [
    [pup.state?.terminated, false],
    [pup.lastState?.terminated, true],
  ] as const) {
    if (!t?.exitCode || !t.finishedAt) continue;
    const parsed = Date.parse(t.finishedAt);
    if (Number.isNaN(parsed)) continue;
    // The kubelet gives whole seconds: the death came at most 999 ms after the time shown, and a lease
    // renewed in that second was still the dead run's (a restarted pup takes longer than that to start).
    const at = /\.\d+/.test(t.finishedAt) ? parsed : parsed + 999;
    out.push({
      key: `${pod.metadata.uid}/${t.finishedAt}/${t.exitCode}`,
      holt: { namespace: pod.metadata.namespace ?? 'default', name: holt },
      exit: {
        owner: pod.metadata.name,
        role,
        exit_code: t.exitCode,
        ...(t.reason ? { reason: t.reason.slice(0, 64) } : {}),
        at_ms: at,
      },
      previous,
      finishedAt: t.finishedAt,
    });
  }
  return out;
}

/**
 * Which of the pup's logs holds the run that ended at `finishedAt`, as the pod is now: its current
 * container's (not restarted yet), the previous one's (restarted once since), or none (restarted
 * twice since: the kubelet keeps no older log). Pure.
 */
export function logOfRun(pod: KubeObject, finishedAt: string): 'current' | 'previous' | undefined {
  const d = podDeaths(pod).find((x) => x.finishedAt === finishedAt);
  return d ? (d.previous ? 'previous' : 'current') : undefined;
}

/** Credentials in URLs (scheme://user:password@host) are cut out of a log before it is reported. */
export function scrubLog(text: string): string {
  return text.replace(/([a-z][a-z0-9+.-]*:\/\/[^\s:/@]+:)[^\s@/]+@/gi, '$1[redacted]@');
}

export interface WorkerExitWatchOptions {
  client: KubeClient;
  log: Logger;
  /** Appends a report to the Holt's worker_exits stream (its Redis, as the operator's user). */
  report: (holt: HoltRef, e: WorkerExit) => Promise<void>;
}

/**
 * The operator's eye on the pods it launched for claims, as Holt's orchestrator watches its worker
 * containers: each time a pup dies with a non-zero code, its exit and last 100 log lines go to the
 * Holt, whose orchestrator frees the claim at once and, when the tries run out, writes a WorkerFailure.
 * Fed by the operator's pod informer; reports only while running (the leader). A report sent twice
 * (a new leader relists) changes nothing.
 */
export class WorkerExitWatch {
  readonly #o: WorkerExitWatchOptions;
  readonly #core: CoreV1Api;
  /** Deaths already reported, per pod uid (dropped with the pod). */
  readonly #seen = new Map<string, Set<string>>();
  running = false;

  constructor(o: WorkerExitWatchOptions) {
    this.#o = o;
    this.#core = o.client.kc.makeApiClient(CoreV1Api);
  }

  onPod(event: InformerEvent, pod: KubeObject): void {
    const uid = pod.metadata.uid ?? '';
    if (event === 'delete') {
      this.#seen.delete(uid);
      return;
    }
    const component = pod.metadata.labels?.['app.kubernetes.io/component'];
    if (!this.running || (component !== 'worker' && component !== 'claim-job')) return;
    for (const d of podDeaths(pod)) void this.#handle(uid, d);
  }
  async #handle(uid: string, d: PodDeath): Promise<void> {
    const seen = this.#seen.get(uid) ?? new Set<string>();
    if (seen.has(d.key)) return;
    seen.add(d.key);
    this.#seen.set(uid, seen);
    const logs = await this.#deadRunLog(d);
    try {
      await this.#o.report(d.holt, { ...d.exit, logs });
      this.#o.log.warn(
        {
          event_type: 'worker_exit_reported',
          holt: `${d.holt.namespace}/${d.holt.name}`,
          pod: d.exit.owner,
          exit_code: d.exit.exit_code,
          reason: d.exit.reason,
        },
        `worker ${d.exit.owner} exited with code ${d.exit.exit_code}`,
      );
    } catch (e) {
      // Its Redis is away: forget it, so the pod's next update or the informer's relist tries again.
      seen.delete(d.key);
      this.#o.log.warn(
        { event_type: 'worker_exit_report_failed', pod: d.exit.owner, error: String(e) },
        'worker exit not reported yet',
      );
    }
  }

  /**
   * The log of the run that died. The status this death came from may be old by now: the kubelet
   * restarts the pup within a second or two, and a log read as the "current" one after that is the new
   * run's. So the pod is read again to pick the log, and once more after a current log was read: if the
   * run was replaced meanwhile, its log is now the previous one.
   */
  async #deadRunLog(d: PodDeath): Promise<string> {
    const where = async () => {
      const pod = await this.#o.client.get('Pod', d.holt.namespace, d.exit.owner).catch(() => undefined);
      return pod ? logOfRun(pod, d.finishedAt) : d.previous ? 'previous' : 'current';
    };
    const read = (previous: boolean) =>
      this.#core
        .readNamespacedPodLog({
          name: d.exit.owner,
          namespace: d.holt.namespace,
          container: PUP,
          tailLines: 100,
          previous,
        })
        .then(
          (t) => scrubLog(String(t)).slice(-200_000),
          (e: unknown) => `(its log could not be read: ${errorMessage(e)})`,
        );
    const gone = '(its log is gone: the pup was restarted twice since it died)';
    const before = await where();
    if (before !== 'current') return before === 'previous' ? read(true) : gone;
    const text = await read(false);
    const after = await where();
    if (after === 'current') return text;
    return after === 'previous' ? read(true) : gone;
  }
}
