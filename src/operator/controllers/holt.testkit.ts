import { afterAll, beforeAll } from 'vitest';
import { type KubeCluster, startKube } from '../../../test/harness/kube.ts';
import { type RedisServer, startRedis } from '../../../test/harness/redis.ts';
import { createLogger, silentLogger } from '../../common/logger.ts';
import { freePort } from '../../local/ports.ts';
import { KubeClient, type KubeObject } from '../kube/kube.ts';
import { Operator } from '../operator.ts';
import { agentObject, holtObject, installCrds, NO_CLUSTER_DNS } from '../testkit.ts';
import { RedisRegistryWriter } from './registry.ts';

/** What the Holt controller's tests share (holt.test.ts, holt-features.test.ts). */

export const NS = 'holt-test';
export const RUNTIME = 'example.test/holt-runtime:1';

export let kube: KubeCluster;
export let redis: RedisServer;
export let admin: KubeClient;
export let op: Operator;
let deadUrl: string;
/** Holts whose Redis is "unreachable" (a port nobody listens on) until the test fixes it. */
export const unreachable = new Set<string>();

export function startOperator(): Operator {
  const client = new KubeClient(kube.kubeconfig);
  if (process.env.OP_DEBUG)
    client.onRequest = (r) => r.verb !== 'list' && r.verb !== 'get' && console.log('WRITE', r.verb, r.path);
  return new Operator({
    client,
    log: process.env.OP_DEBUG ? createLogger('operator') : silentLogger(),
    namespaces: [NS],
    runtimeImage: RUNTIME,
    registry: new RedisRegistryWriter(async (h) => (unreachable.has(h.name) ? deadUrl : redis.url)),
    resyncMs: 60_000,
    network: { operatorNamespace: 'holt-system' },
    resolveHost: NO_CLUSTER_DNS,
  });
}

export const holt = (name: string, spec: Record<string, unknown> = {}): KubeObject =>
  holtObject(NS, name, spec);
export const agent = (name: string, spec: Record<string, unknown>): KubeObject => agentObject(NS, name, spec);

export const get = (kind: string, name: string) => admin.get(kind, NS, name);
export const statusOf = (o: KubeObject | undefined) =>
  (o?.status ?? {}) as {
    phase?: string;
    observedGeneration?: number;
    conditions?: { type: string; status: string; reason: string; observedGeneration?: number }[];
  };
export const cond = (o: KubeObject | undefined, type: string) =>
  statusOf(o).conditions?.find((c) => c.type === type);
export type Pod = {
  spec: {
    containers: Record<string, unknown>[];
    securityContext: Record<string, unknown>;
    volumes: Record<string, unknown>[];
  };
};
export const podOf = (d: KubeObject | undefined) =>
  (d?.spec as { template: Pod } | undefined)?.template as Pod;

/** Stops the operator and starts a new one on the same API server (a restart, as a new pod would). */
export async function restartOperator(): Promise<Operator> {
  await op.stop();
  op = startOperator();
  await op.startInformers();
  op.startControllers();
  return op;
}

/**
 * A real API server (with a controller manager), a Redis for the registry, the CRDs, namespace NS and a
 * running operator, for the calling test file: started before its tests, stopped after them.
 */
export function useHoltControllerEnv(): void {
  beforeAll(async () => {
    [kube, redis] = await Promise.all([startKube({ controllerManager: true }), startRedis()]);
    deadUrl = `redis://127.0.0.1:${await freePort()}`; // nobody listens there
    admin = new KubeClient(kube.kubeconfig);
    await installCrds(admin);
    await admin.create({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: NS } });
    op = startOperator();
    await op.startInformers();
    op.startControllers();
  });

  afterAll(async () => {
    await op?.stop();
    admin?.close();
    await Promise.all([kube?.stop(), redis?.stop()]);
  });
}
