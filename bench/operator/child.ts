/**
 * The operator of the bench, in its own process so its RSS is measured alone (the bench's API
 * objects and fake kubelet live in the parent). Driven over IPC by bench/operator/main.ts:
 *   node bench/operator/child.ts <kubeconfig> <namespace>
 * Messages in: `settle` (wait until the operator is quiescent), `stats`, `stop`.
 * Messages out: `started`, `settled`, `stats` (requests and writes by verb and path, RSS).
 */
import { KubeConfig } from '@kubernetes/client-node';
import { silentLogger } from '../../src/common/logger.ts';
import type { RegistryWriter } from '../../src/operator/controllers/registry.ts';
import { KubeClient } from '../../src/operator/kube/kube.ts';
import { Operator } from '../../src/operator/operator.ts';

export type ChildRequest = { type: 'settle' } | { type: 'stats' } | { type: 'stop' };
export type ChildReply =
  | { type: 'started' }
  | { type: 'settled' }
  | {
      type: 'stats';
      requests: number;
      writes: number;
      /** Writes by `verb path` (names of the bench's objects folded to X). */
      writesByPath: Record<string, number>;
      rssMB: number;
      heapMB: number;
      heapTotalMB: number;
      externalMB: number;
      /** Objects in the informers' caches and their size as JSON. */
      cachedObjects: number;
      cachedJsonMB: number;
    };

const [kubeconfigPath, namespace] = process.argv.slice(2);
if (!kubeconfigPath || !namespace || !process.send) {
  console.error('usage (forked by bench/operator/main.ts): child.ts <kubeconfig> <namespace>');
  process.exit(2);
}
const send = (m: ChildReply) => process.send?.(m);
const kc = new KubeConfig();
kc.loadFromFile(kubeconfigPath);
const client = new KubeClient(kc);
const writesByPath: Record<string, number> = {};
client.onRequest = (r) => {
  if (r.verb === 'get' || r.verb === 'list') return;
  const k = `${r.verb} ${r.path.replace(/\?.*$/, '').replace(/\/h\d+[^/]*/g, '/X')}`;
  writesByPath[k] = (writesByPath[k] ?? 0) + 1;
  if (process.env.BENCH_DEBUG) console.error('WRITE', r.verb, r.path);
};
// The agent registry goes to memory (no 100 Redis servers).
const registry: RegistryWriter = { write: async () => undefined };
const op = new Operator({ client, log: silentLogger(), namespaces: [namespace], registry, concurrency: 8 });
await op.startInformers();
op.startControllers();

process.on('message', (m: ChildRequest) => {
  if (m.type === 'settle') void op.settled().then(() => send({ type: 'settled' }));
  else if (m.type === 'stats') {
    const cached = [...op.cache.informers.values()].flatMap((i) => i.list());
    const mem = process.memoryUsage();
    send({
      type: 'stats',
      requests: client.total(),
      writes: client.writes(),
      writesByPath: { ...writesByPath },
      rssMB: Math.round(mem.rss / 2 ** 20),
      heapMB: Math.round(mem.heapUsed / 2 ** 20),
      heapTotalMB: Math.round(mem.heapTotal / 2 ** 20),
      externalMB: Math.round(mem.external / 2 ** 20),
      cachedObjects: cached.length,
      cachedJsonMB: Math.round(cached.reduce((n, o) => n + JSON.stringify(o).length, 0) / 2 ** 20),
    });
  } else if (m.type === 'stop')
    void op.stop().then(() => {
      client.close();
      process.exit(0);
    });
});
send({ type: 'started' });
