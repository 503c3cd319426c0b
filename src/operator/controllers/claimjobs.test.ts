import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type KubeCluster, startKube } from '../../../test/harness/kube.ts';
import { type PostgresServer, startPostgres } from '../../../test/harness/postgres.ts';
import { silentLogger } from '../../common/logger.ts';
import { migrate } from '../../inbox/migrate.ts';
import { InboxStore } from '../../inbox/store.ts';
import { PostgresBacklogReader } from '../autoscale/backlog.ts';
import { Operator } from '../operator.ts';
import { KubeClient, type KubeObject } from '../runtime/kube.ts';
import { CLAIM_LABEL } from '../specs/claimjob.ts';
import { HOLT_BIN } from '../specs/orchestrator.ts';
import { eventually, fakeKubelet, installCrds } from '../testkit.ts';
import type { RegistryWriter } from './registry.ts';

// fresh_per_call agents: one Job per pending inbox row, at most `replicas` running at once.
const NS = 'claimjobs';
let kube: KubeCluster;
let pgs: PostgresServer;
let admin: KubeClient;
let op: Operator;
let inbox: InboxStore;

const registry: RegistryWriter = { write: async () => undefined };
type JobSpec = {
  ttlSecondsAfterFinished?: number;
  template: {
    spec: {
      restartPolicy: string;
      containers: { command: string[]; env: { name: string; value?: string; valueFrom?: unknown }[] }[];
    };
  };
};
const jobSpec = (j: KubeObject) => j.spec as JobSpec;
const claimOf = (j: KubeObject) => {
  const cmd = jobSpec(j).template.spec.containers[0]?.command ?? [];
  return cmd[cmd.indexOf('--execute-claim') + 1];
};
const jobs = async () =>
  (await admin.list('Job', NS, { labelSelector: 'app.kubernetes.io/component=claim-job' })).items;
const enqueue = (claimId: string) =>
  inbox.enqueue({
    instance: 'fj',
    workerTarget: 'fresh',
    claimId,
    role: 'fresh',
    claimType: 'claim',
    phase: 'exclusive',
  });
const setRow = (claimId: string, status: 'done' | 'claimed') =>
  inbox.pool.query(`UPDATE holt.agent_inbox SET status = $2 WHERE instance = 'fj' AND claim_id = $1`, [
    claimId,
    status,
  ]);

beforeAll(async () => {
  [kube, pgs] = await Promise.all([startKube({ controllerManager: true }), startPostgres()]);
  await migrate(pgs.url);
  inbox = InboxStore.connect(pgs.url, { max: 2 });
  admin = new KubeClient(kube.kubeconfig);
  await installCrds(admin);
  await admin.create({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: NS } });
  op = new Operator({
    client: new KubeClient(kube.kubeconfig),
    log: silentLogger(),
    namespaces: [NS],
    registry,
    claims: new PostgresBacklogReader(async () => pgs.url),
    pollMs: 200,
  });
  await op.startInformers();
  op.startControllers();
  await admin.create({
    apiVersion: 'holt.io/v1alpha1',
    kind: 'Holt',
    metadata: { name: 'fj', namespace: NS },
    spec: {},
  });
});

afterAll(async () => {
  await op?.stop();
  await inbox?.close();
  admin?.close();
  await Promise.all([kube?.stop(), pgs?.stop()]);
});

describe('fresh_per_call agents: one Job per pending claim', () => {
  let agentUid = '';

  it('pending rows → one Job each (up to replicas at once), a worker pup with --execute-claim', async () => {
    for (const c of ['c-1', 'c-2', 'c-3']) await enqueue(c);
    const agent = await admin.create<KubeObject>({
      apiVersion: 'holt.io/v1alpha1',
      kind: 'Agent',
      metadata: { name: 'fresh', namespace: NS },
      spec: {
        holt: 'fj',
        role: 'fresh',
        command: ['/bin/true'],
        bidding: { strategy: 'claim' },
        strategy: 'fresh_per_call',
        replicas: 2,
      },
    });
    agentUid = agent.metadata.uid ?? '';
    const two = await eventually('two claim jobs', async () => {
      const l = await jobs();
      return l.length === 2 ? l : undefined;
    });
    // Oldest claims first; at most replicas (2) running, so c-3 waits.
    expect(two.map(claimOf).sort()).toEqual(['c-1', 'c-2']);
    for (const j of two) {
      expect(j.metadata.ownerReferences?.[0]).toMatchObject({
        kind: 'Agent',
        uid: agentUid,
        controller: true,
      });
      expect(j.metadata.labels?.[CLAIM_LABEL]).toBe(claimOf(j));
      const s = jobSpec(j);
      expect(s.ttlSecondsAfterFinished).toBeGreaterThan(0);
      expect(s.template.spec.restartPolicy).toBe('Never');
      const c = s.template.spec.containers[0];
      expect(c?.command).toEqual([HOLT_BIN, 'pup', '--execute-claim', claimOf(j)]);
      const env = new Map(c?.env.map((e) => [e.name, e]));
      expect(env.get('HOLT_MODE')?.value).toBe('worker');
      expect(env.get('HOLT_POD_NAME')?.valueFrom).toMatchObject({ fieldRef: { fieldPath: 'metadata.name' } });
    }
    // The rows stay pending until a pod claims them: reconciles meanwhile make no second Job.
    op.resyncAll();
    await op.settled();
    expect((await jobs()).length).toBe(2);
  });

  it('a finished claim frees a slot: the next pending row gets its Job; done rows get none', async () => {
    // The claim's pod ran (the pup marks its row done); its Job completes.
    await setRow('c-1', 'done');
    const j1 = (await jobs()).find((j) => claimOf(j) === 'c-1') as KubeObject;
    await eventually('c-1 job complete', async () => {
      await fakeKubelet(admin, NS, { labelSelector: `batch.kubernetes.io/job-name=${j1.metadata.name}` });
      const j = await admin.get('Job', NS, j1.metadata.name);
      return (j?.status as { succeeded?: number } | undefined)?.succeeded ? true : undefined;
    });
    const three = await eventually('a job for c-3', async () => {
      const l = await jobs();
      return l.some((j) => claimOf(j) === 'c-3') ? l : undefined;
    });
    expect(three.map(claimOf).sort()).toEqual(['c-1', 'c-2', 'c-3']);
    // Steady: nothing more to start, and a full reconcile writes nothing.
    await op.settled();
    const before = op.ctx.client.writes();
    op.resyncAll();
    await op.settled();
    expect(op.ctx.client.writes()).toBe(before);
    expect((await jobs()).length).toBe(3);
  });

  it('cleanup: the Agent deleted → its claim Jobs go with it (owner references, GC)', async () => {
    await admin.delete('Agent', NS, 'fresh');
    await eventually(
      'claim jobs collected',
      async () => ((await jobs()).length === 0 ? true : undefined),
      60_000,
    );
    await eventually('agent gone (finalizer released)', async () =>
      (await admin.get('Agent', NS, 'fresh')) ? undefined : true,
    );
  });
});
