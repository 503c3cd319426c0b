import { join } from 'node:path';
import { KubeConfig } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type KubeCluster, startKube, writeKubeconfig } from '../../../test/harness/kube.ts';
import { eventually } from '../../../test/harness/wait.ts';
import { createLogger } from '../../common/logger.ts';
import { Informer, nextWatchRetry, WATCH_BACKOFF } from './informer.ts';
import { KubeClient } from './kube.ts';

describe('pure: the watch restart backoff', () => {
  it('doubles from 800 ms to 30 s with each failure in a row; a restart alone never resets it', () => {
    let f = { count: 0, restartAt: 0 };
    const delays: number[] = [];
    let now = 1_000_000;
    for (let i = 0; i < 8; i++) {
      const r = nextWatchRetry(f, now);
      delays.push(r.delayMs);
      f = r.next;
      // The watch restarts when the delay is over and fails at once (a 403): no time without failure.
      now = f.restartAt;
    }
    expect(delays).toEqual([800, 1600, 3200, 6400, 12_800, 25_600, 30_000, 30_000]);
  });

  it('is forgotten after two minutes without a failure', () => {
    const r = nextWatchRetry({ count: 6, restartAt: 5_000 }, 5_000 + WATCH_BACKOFF.resetMs + 1);
    expect(r.delayMs).toBe(800);
    const still = nextWatchRetry({ count: 6, restartAt: 5_000 }, 5_000 + WATCH_BACKOFF.resetMs);
    expect(still.delayMs).toBe(30_000);
  });
});

// Issue 29: a namespace being deleted takes the operator's RoleBinding first; the operator's watches
// there then get 403 on every start. They were restarted every 500 ms for ever (a reconnect reset
// the backoff); each attempt must wait twice as long as the last.
const NS = 'rbac-gone';
const SA = 'watcher';
let kube: KubeCluster;

beforeAll(async () => {
  kube = await startKube();
  await kube.kubectl(['create', 'namespace', NS]);
  await kube.kubectl(['create', 'serviceaccount', SA, '-n', NS]);
  await kube.kubectl(['create', 'role', 'watch-svc', '--verb=list,watch', '--resource=services', '-n', NS]);
  await kube.kubectl([
    'create',
    'rolebinding',
    'watch-svc',
    '--role=watch-svc',
    `--serviceaccount=${NS}:${SA}`,
    '-n',
    NS,
  ]);
  await kube.kubectl(['create', 'service', 'clusterip', 'seen', '--tcp=80:80', '-n', NS]);
}, 120_000);

afterAll(async () => {
  await kube?.stop();
});

function saClient(): KubeClient {
  return new KubeClient(loadKubeconfig());
}

let kubeconfigPath = '';
function loadKubeconfig(): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromFile(kubeconfigPath);
  return kc;
}

describe('an informer whose RBAC is removed, on a real API server', () => {
  it('retries with a doubling delay, one request per attempt (counted, not timed)', async () => {
    const token = (await kube.kubectl(['create', 'token', SA, '-n', NS, '--duration=1h'])).trim();
    kubeconfigPath = join(kube.dir, 'watcher.kubeconfig');
    writeKubeconfig(kubeconfigPath, kube.server, kube.caPath, SA, token);
    const lines: { event_type?: string; retry_ms?: number; error?: string }[] = [];
    const log = createLogger('operator', {}, { write: (s: string) => void lines.push(JSON.parse(s)) });

    // With its Role bound (once the API server's RBAC cache has it), the informer lists and watches.
    const first = saClient();
    await eventually('the RoleBinding in effect', () => first.list('Service', NS));
    const ok = new Informer(first, { kind: 'Service', namespaces: [NS] }, log);
    await ok.start();
    expect(ok.get(NS, 'seen')).toBeDefined();
    await ok.stop();
    expect(lines.filter((l) => l.event_type === 'watch_error')).toEqual([]);

    // The RoleBinding goes (as the first thing a namespace deletion removes): every start is refused.
    await kube.kubectl(['delete', 'rolebinding', 'watch-svc', '-n', NS]);
    const client = saClient();
    let lists = 0;
    client.onRequest = (r) => {
      if (r.verb === 'list') lists++;
    };
    await eventually('the RoleBinding removal takes effect', () =>
      client.list('Service', NS).then(
        () => undefined,
        () => true,
      ),
    );
    lists = 0;
    lines.length = 0;
    const refused = new Informer(client, { kind: 'Service', namespaces: [NS] }, log);
    await refused.start();
    try {
      const errors = await eventually(
        'five refused attempts',
        () => {
          const e = lines.filter((l) => l.event_type === 'watch_error');
          return e.length >= 5 ? e : undefined;
        },
        { timeoutMs: 60_000 },
      );
      // Each attempt is one list request, and each waits twice as long as the one before.
      expect(lists).toBe(errors.length);
      expect(errors[0]?.error).toMatch(/forbidden|403/i);
      expect(errors.slice(0, 5).map((e) => e.retry_ms)).toEqual([800, 1600, 3200, 6400, 12_800]);
    } finally {
      await refused.stop();
    }
  }, 120_000);
});

// A periodic relist must never show an empty cache: a reconcile that read it then saw the Holt's store
// Services gone and rendered its agents' pods without their host aliases (a rollout there and back,
// seen once in the cluster e2e as Deployments scaled 1 → 0 → 1).
describe('an informer relisting, on a real API server', () => {
  it('never misses an object while it relists', async () => {
    const log = createLogger('operator', {}, { write: () => undefined });
    const informer = new Informer(
      new KubeClient(kube.kubeconfig),
      { kind: 'Service', namespaces: [NS], resyncMs: 50 },
      log,
    );
    await informer.start();
    let reads = 0;
    let misses = 0;
    try {
      const until = Date.now() + 3000;
      while (Date.now() < until) {
        reads++;
        if (!informer.get(NS, 'seen')) misses++;
        if (!informer.list(NS).some((s) => s.metadata.name === 'seen')) misses++;
        await new Promise((r) => setImmediate(r));
      }
    } finally {
      await informer.stop();
    }
    expect(reads).toBeGreaterThan(100);
    expect(misses).toBe(0);
  });

  it('tells no delete of an object made while it relists', async () => {
    const log = createLogger('operator', {}, { write: () => undefined });
    const informer = new Informer(
      new KubeClient(kube.kubeconfig),
      { kind: 'Service', namespaces: [NS], resyncMs: 50 },
      log,
    );
    const deleted: string[] = [];
    informer.on((event, o) => {
      if (event === 'delete') deleted.push(o.metadata.name);
    });
    await informer.start();
    const made: string[] = [];
    try {
      for (let i = 0; i < 12; i++) {
        const name = `made-${i}`;
        await kube.kubectl(['create', 'service', 'clusterip', name, '--tcp=80:80', '-n', NS]);
        made.push(name);
      }
      await eventually('the informer has them all', () =>
        made.every((n) => informer.get(NS, n)) ? true : undefined,
      );
      // A few more relists over what is there now.
      await new Promise((r) => setTimeout(r, 500));
    } finally {
      await informer.stop();
    }
    expect(deleted.filter((n) => made.includes(n) || n === 'seen')).toEqual([]);
  });
});
