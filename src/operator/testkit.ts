import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseAllDocuments } from 'yaml';
import { type KubeCluster, type KubeOptions, startKube } from '../../test/harness/kube.ts';
import { eventually } from '../../test/harness/wait.ts';
import { silentLogger } from '../common/logger.ts';
import type { ControllerContext } from './controllers/context.ts';
import { Cache } from './kube/cache.ts';
import { Informer } from './kube/informer.ts';
import { KubeClient, type KubeObject, refOf } from './kube/kube.ts';
import { Operator, type OperatorOptions } from './operator.ts';

const loose = { type: 'object', 'x-kubernetes-preserve-unknown-fields': true };

/** A minimal CRD (schema-less spec/status, status and scale subresources) for when crds/ is not generated yet. */
function minimalCrd(kind: string, plural: string, scale: boolean): KubeObject {
  return {
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: { name: `${plural}.holt.io` },
    spec: {
      group: 'holt.io',
      scope: 'Namespaced',
      names: { plural, singular: kind.toLowerCase(), kind, listKind: `${kind}List` },
      versions: [
        {
          name: 'v1alpha1',
          served: true,
          storage: true,
          subresources: {
            status: {},
            ...(scale
              ? {
                  scale: {
                    specReplicasPath: '.spec.replicas',
                    statusReplicasPath: '.status.replicas',
                    labelSelectorPath: '.status.selector',
                  },
                }
              : {}),
          },
          schema: { openAPIV3Schema: { type: 'object', properties: { spec: loose, status: loose } } },
        },
      ],
    },
  };
}

/** The CRDs: the generated crds/*.yaml when present, else minimal ones. */
export function holtCrds(root = process.cwd()): KubeObject[] {
  const dir = join(root, 'crds');
  const files = existsSync(dir) ? readdirSync(dir).filter((f) => f.endsWith('.yaml')) : [];
  const docs = files.flatMap((f) =>
    parseAllDocuments(readFileSync(join(dir, f), 'utf8'))
      .map((d) => d.toJS() as KubeObject | null)
      .filter((d): d is KubeObject => d?.kind === 'CustomResourceDefinition'),
  );
  const have = new Set(docs.map((d) => d.metadata.name));
  for (const [kind, plural, scale] of [
    ['Holt', 'holts', false],
    ['Agent', 'agents', false],
    ['WorkerPool', 'workerpools', true],
  ] as const)
    if (!have.has(`${plural}.holt.io`)) docs.push(minimalCrd(kind, plural, scale));
  return docs;
}

/** Installs the CRDs and waits until each serves requests. */
export async function installCrds(client: KubeClient): Promise<void> {
  for (const crd of holtCrds()) {
    await client.create(crd as KubeObject).catch((e: unknown) => {
      if (!(e instanceof Error && 'status' in e && e.status === 409)) throw e;
    });
  }
  for (const kind of ['Holt', 'Agent', 'WorkerPool', 'ToolServer'])
    await eventually(`${kind} to be served`, async () => {
      await client.list(kind);
      return true;
    });
}

export { KubeClient };

/** A real API server (with a controller-manager if asked) with the CRDs installed and `namespace` made. */
export async function startKubeWithCrds(
  namespace: string,
  opts: KubeOptions = {},
): Promise<{ kube: KubeCluster; admin: KubeClient }> {
  const kube = await startKube(opts);
  const admin = new KubeClient(kube.kubeconfig);
  await installCrds(admin);
  await admin.create({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: namespace } });
  return { kube, admin };
}

/** A registry writer that writes nowhere (for tests with no Redis behind their Holts). */
export const NO_REGISTRY: OperatorOptions['registry'] = { write: async () => undefined };

/**
 * An operator on one namespace of `kube` (silent, no registry unless given), its informers synced and
 * its controllers running.
 */
/** Tests send no DNS query off the machine: a name is resolved only where a test says how. */
export const NO_CLUSTER_DNS = async (host: string): Promise<string> => {
  throw new Error(`no cluster DNS in this test (${host})`);
};

export async function startOperator(
  kube: KubeCluster,
  namespace: string,
  opts: Partial<Omit<OperatorOptions, 'client' | 'namespaces'>> = {},
): Promise<Operator> {
  const op = new Operator({
    client: new KubeClient(kube.kubeconfig),
    log: silentLogger(),
    namespaces: [namespace],
    registry: NO_REGISTRY,
    resolveHost: NO_CLUSTER_DNS,
    ...opts,
  });
  await op.startInformers();
  op.startControllers();
  return op;
}

/**
 * A controller's context whose cache holds one started informer (`kind` in `namespace`), for a test
 * that calls a controller's functions by hand; `stop` ends the informer.
 */
export async function informedContext(
  client: KubeClient,
  kind: string,
  namespace: string,
): Promise<{ ctx: ControllerContext; stop: () => Promise<void> }> {
  const cache = new Cache();
  const inf = new Informer(client, { kind, namespaces: [namespace] }, silentLogger());
  cache.add(inf);
  await inf.start();
  const ctx = { client, cache, log: silentLogger() } as unknown as ControllerContext;
  return { ctx, stop: () => inf.stop() };
}

/** A Holt of `namespace`; with no spec, every default (bundled stores). */
export const holtObject = (
  namespace: string,
  name: string,
  spec: Record<string, unknown> = {},
): KubeObject => ({
  apiVersion: 'holt.io/v1alpha1',
  kind: 'Holt',
  metadata: { name, namespace },
  spec,
});

/** An Agent of `namespace` (its spec names its Holt). */
export const agentObject = (namespace: string, name: string, spec: Record<string, unknown>): KubeObject => ({
  apiVersion: 'holt.io/v1alpha1',
  kind: 'Agent',
  metadata: { name, namespace },
  spec,
});

/**
 * A stand-in for the kubelet (none runs in tests): marks the pods of a namespace (those matching
 * `labelSelector`, if given) Running and Ready, or Succeeded for Job pods, so the controllers'
 * workload status reflects ready pods.
 */
export async function fakeKubelet(
  client: KubeClient,
  namespace: string,
  opts: { labelSelector?: string } = {},
): Promise<number> {
  const pods = await client.list('Pod', namespace, opts);
  let n = 0;
  for (const p of pods.items) {
    const job = p.metadata.labels?.['batch.kubernetes.io/job-name'] !== undefined;
    const phase = job ? 'Succeeded' : 'Running';
    const st = p.status as { phase?: string } | undefined;
    if (st?.phase === phase) continue;
    const now = new Date().toISOString().replace(/\.\d{3}Z$/, 'Z');
    const containers = ((p.spec as { containers: { name: string; image: string }[] }).containers ?? []).map(
      (c) => ({
        name: c.name,
        image: c.image,
        imageID: '',
        ready: !job,
        restartCount: 0,
        started: !job,
        state: job
          ? { terminated: { exitCode: 0, reason: 'Completed', startedAt: now, finishedAt: now } }
          : { running: { startedAt: now } },
      }),
    );
    await client.patch(
      refOf('Pod', namespace, p.metadata.name),
      {
        status: {
          phase,
          startTime: now,
          conditions: [
            { type: 'PodScheduled', status: 'True', lastTransitionTime: now },
            { type: 'Initialized', status: 'True', lastTransitionTime: now },
            { type: 'ContainersReady', status: job ? 'False' : 'True', lastTransitionTime: now },
            { type: 'Ready', status: job ? 'False' : 'True', lastTransitionTime: now },
          ],
          containerStatuses: containers,
        },
      },
      { subresource: 'status' },
    );
    n++;
  }
  return n;
}

/**
 * Writes the operator sends when everything is reconciled again from a quiescent state (queues idle,
 * nothing in flight, its own writes seen by the informers), with a quiet second to let any
 * consequence play out. A steady state sends none.
 */
export async function writesOnResync(op: Operator): Promise<number> {
  await op.settled();
  const before = op.ctx.client.writes();
  op.resyncAll();
  await op.settled();
  await new Promise((r) => setTimeout(r, 1000));
  await op.settled();
  return op.ctx.client.writes() - before;
}
