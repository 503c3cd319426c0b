import { connect, type NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { KubeCluster } from '../../../test/harness/kube.ts';
import { type NatsServer, startNats } from '../../../test/harness/nats.ts';
import { type PostgresServer, startPostgres } from '../../../test/harness/postgres.ts';
import { eventually } from '../../../test/harness/wait.ts';
import { ringDoorbell } from '../../bus/doorbell.ts';
import { silentLogger } from '../../common/logger.ts';
import { InboxStore } from '../../inbox/store.ts';
import { migrate } from '../../state/migrate.ts';
import { PostgresBacklogReader } from '../autoscale/backlog.ts';
import { NatsWakeups } from '../autoscale/wakeup.ts';
import { KubeClient, type KubeObject } from '../kube/kube.ts';
import { buildOperator } from '../main.ts';
import type { Operator } from '../operator.ts';
import { CLAIM_EPOCH_LABEL, CLAIM_LABEL } from '../specs/claimjob.ts';
import {
  agentObject,
  fakeKubelet,
  holtObject,
  NO_REGISTRY,
  startKubeWithCrds,
  startOperator,
  writesOnResync,
} from '../testkit.ts';
import { finishedClaimJobs } from './claimjobs.ts';

// fresh_per_call agents: one Job per pending inbox row, at most `replicas` running at once.
const NS = 'claimjobs';
let kube: KubeCluster;
let pgs: PostgresServer;
let admin: KubeClient;
let op: Operator;
let inbox: InboxStore;

type JobSpec = {
  ttlSecondsAfterFinished?: number;
  podReplacementPolicy?: string;
  template: {
    spec: {
      restartPolicy: string;
      containers: { args?: string[]; env: { name: string; value?: string; valueFrom?: unknown }[] }[];
    };
  };
};
const jobSpec = (j: KubeObject) => j.spec as JobSpec;
const claimOf = (j: KubeObject) => {
  const cmd = jobSpec(j).template.spec.containers[0]?.args ?? [];
  return cmd[cmd.indexOf('--execute-claim') + 1];
};
const jobs = async (ns = NS) =>
  (await admin.list('Job', ns, { labelSelector: 'app.kubernetes.io/component=claim-job' })).items;
const enqueue = (claimId: string, instance = 'fj') =>
  inbox.enqueue({
    instance,
    workerTarget: 'fresh',
    claimId,
    role: 'fresh',
    claimType: 'claim',
    phase: 'exclusive',
  });
/** A fresh_per_call Agent named fresh of the Holt `holt`, a tool that does nothing. */
const freshAgent = (ns: string, holt: string, replicas: number) =>
  agentObject(ns, 'fresh', {
    holt,
    role: 'fresh',
    command: ['/bin/true'],
    bidding: { strategy: 'claim' },
    strategy: 'fresh_per_call',
    replicas,
  });
const setRow = (claimId: string, status: 'done' | 'claimed') =>
  inbox.pool.query(`UPDATE holt.agent_inbox SET status = $2 WHERE instance = 'fj' AND claim_id = $1`, [
    claimId,
    status,
  ]);

beforeAll(async () => {
  let env: Awaited<ReturnType<typeof startKubeWithCrds>>;
  [env, pgs] = await Promise.all([startKubeWithCrds(NS, { controllerManager: true }), startPostgres()]);
  ({ kube, admin } = env);
  await migrate(pgs.url);
  inbox = InboxStore.connect(pgs.url, { max: 2 });
  op = await startOperator(kube, NS, { claims: new PostgresBacklogReader(async () => pgs.url), pollMs: 200 });
  await admin.create(holtObject(NS, 'fj'));
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
    const agent = await admin.create<KubeObject>(freshAgent(NS, 'fj', 2));
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
      // As the API server stored it: no second pod while a deleted one still terminates (its lease).
      expect(s.podReplacementPolicy).toBe('Failed');
      expect(s.template.spec.restartPolicy).toBe('Never');
      const c = s.template.spec.containers[0];
      expect(c?.args).toEqual(['pup', '--execute-claim', claimOf(j)]);
      const env = new Map(c?.env.map((e) => [e.name, e]));
      expect(env.get('HOLT_MODE')?.value).toBe('worker');
      expect(env.get('HOLT_POD_NAME')?.valueFrom).toMatchObject({ fieldRef: { fieldPath: 'metadata.name' } });
    }
    // The rows stay pending until a pod claims them: reconciles meanwhile make no second Job.
    op.resyncAll();
    await op.settled();
    expect((await jobs()).length).toBe(2);
  });

  it('a finished claim frees a slot and its succeeded Job is deleted with its pod; the next row gets its Job', async () => {
    // The claim's pod ran (the pup marks its row done); its Job completes.
    await setRow('c-1', 'done');
    const j1 = (await jobs()).find((j) => claimOf(j) === 'c-1') as KubeObject;
    expect(j1.metadata.labels?.[CLAIM_EPOCH_LABEL]).toBe('0');
    const jobPods = (name: string) =>
      admin.list('Pod', NS, { labelSelector: `batch.kubernetes.io/job-name=${name}` }).then((l) => l.items);
    await eventually('c-1 job pod made', async () =>
      (await jobPods(j1.metadata.name)).length ? true : undefined,
    );
    await fakeKubelet(admin, NS, { labelSelector: `batch.kubernetes.io/job-name=${j1.metadata.name}` });
    // Its attempt is over (the row is done): the operator deletes the Job, and with it its pod.
    const after = await eventually('c-1 job deleted and a job for c-3', async () => {
      const l = await jobs();
      return l.some((j) => claimOf(j) === 'c-3') && !l.some((j) => claimOf(j) === 'c-1') ? l : undefined;
    });
    expect(after.map(claimOf).sort()).toEqual(['c-2', 'c-3']);
    await eventually('c-1 job pod collected', async () =>
      (await jobPods(j1.metadata.name)).length === 0 ? true : undefined,
    );
    // Steady once the Job controller has caught up with the new Job (its pod made, its status
    // written: each a change the Agent's status reflects), a full reconcile writes nothing.
    await eventually('every Job started by the Job controller', async () => {
      const started = (await jobs()).every((j) => {
        const st = j.status as { active?: number; succeeded?: number } | undefined;
        return (st?.active ?? 0) + (st?.succeeded ?? 0) > 0;
      });
      return started || undefined;
    });
    expect(await writesOnResync(op)).toBe(0);
    expect((await jobs()).length).toBe(2);
  });

  it('a succeeded Job whose row is still pending at its epoch is kept (back-off); a reclaimed row gets a new Job at once and the old one goes', async () => {
    // c-2's pod never took the row (it is still pending at epoch 0): its succeeded Job stays until its
    // TTL, so the same attempt is not retried in a hot loop.
    const old = (await jobs()).find((j) => claimOf(j) === 'c-2') as KubeObject;
    await eventually('c-2 job finished', async () => {
      await fakeKubelet(admin, NS, { labelSelector: `batch.kubernetes.io/job-name=${old.metadata.name}` });
      const j = await admin.get('Job', NS, old.metadata.name);
      return (j?.status as { succeeded?: number } | undefined)?.succeeded ? true : undefined;
    });
    await eventually('the operator saw it succeed', async () =>
      (op.cache.get('Job', NS, old.metadata.name)?.status as { succeeded?: number } | undefined)?.succeeded
        ? true
        : undefined,
    );
    op.resyncAll();
    await op.settled();
    expect((await jobs()).filter((j) => claimOf(j) === 'c-2').map((j) => j.metadata.name)).toEqual([
      old.metadata.name,
    ]);
    // Then the row is claimed and reclaimed (its pod died): pending again under the next epoch. The
    // finished Job must not block it, and, its attempt over, it is deleted.
    await inbox.pool.query(
      `UPDATE holt.agent_inbox SET turn_epoch = turn_epoch + 1, attempts = attempts + 1
       WHERE instance = 'fj' AND claim_id = 'c-2'`,
    );
    const retry = await eventually('a new job for the reclaimed c-2, the old one deleted', async () => {
      const l = (await jobs()).filter((j) => claimOf(j) === 'c-2');
      return l.length === 1 && l[0]?.metadata.name !== old.metadata.name ? l[0] : undefined;
    }).catch(async (e) => {
      console.log((await jobs()).map((j) => [j.metadata.name, claimOf(j), j.metadata.labels, j.status]));
      throw e;
    });
    expect(retry.metadata.labels?.[CLAIM_EPOCH_LABEL]).toBe('1');
    expect(retry.metadata.ownerReferences?.[0]?.uid).toBe(agentUid);
    // Still one Job per attempt: settled reconciles add none.
    op.resyncAll();
    await op.settled();
    expect((await jobs()).filter((j) => claimOf(j) === 'c-2').length).toBe(1);
  });

  it('cleanup: the Agent deleted → its claim Jobs go with it (owner references, GC)', async () => {
    await admin.delete('Agent', NS, 'fresh');
    await eventually('claim jobs collected', async () => ((await jobs()).length === 0 ? true : undefined), {
      timeoutMs: 60_000,
    });
    await eventually('agent gone (finalizer released)', async () =>
      (await admin.get('Agent', NS, 'fresh')) ? undefined : true,
    );
  });
});

describe("main's wiring (buildOperator): claim Jobs are made in production", () => {
  const NS2 = 'claimjobs-main';
  let real: Operator | undefined;

  afterAll(async () => {
    await real?.stop();
  });

  it('a fresh_per_call agent gets a Job per pending row from the Holt Postgres the wiring resolves', async () => {
    await admin.create({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: NS2 } });
    // The stores the real wiring resolves: Postgres from the Holt's spec (external URL). Redis and
    // NATS are not needed for claim Jobs; only they are stubbed.
    real = buildOperator(
      new KubeClient(kube.kubeconfig),
      silentLogger(),
      { namespaces: [NS2], runtimeImage: 'holt-runtime:test', identity: 'wiring-test', statusPollMs: 60_000 },
      { registry: NO_REGISTRY, runtime: undefined, wakeups: undefined, pollMs: 200 },
    );
    expect(real.ctx.claims).toBeDefined();
    expect(real.ctx.claims).toBe(real.ctx.backlog);
    await real.startInformers();
    real.startControllers();
    // The URL holds a password, so it lives in a Secret (the CRD refuses credentials in a literal url).
    await admin.create({
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name: 'fm-pg', namespace: NS2 },
      stringData: { uri: pgs.url },
    });
    await admin.create(
      holtObject(NS2, 'fm', {
        stores: {
          postgres: { mode: 'external', secretName: 'fm-pg' },
          redis: { mode: 'external', url: 'redis://127.0.0.1:1' },
          nats: { mode: 'external', url: 'nats://127.0.0.1:1' },
        },
      }),
    );
    await enqueue('m-1', 'fm');
    await admin.create<KubeObject>(freshAgent(NS2, 'fm', 1));
    const made = await eventually('a claim job via the real wiring', async () => {
      const l = await jobs(NS2);
      return l.length === 1 ? l : undefined;
    });
    expect(made.map(claimOf)).toEqual(['m-1']);
  });
});

describe('doorbells: a new claim gets its Job at the bell, not at the poll', () => {
  const NS3 = 'claimjobs-bell';
  const SUBJECT = 'cmd.agent.fresh.wakeup';
  let nats: NatsServer;
  let nc: NatsConnection;
  let bell: Operator;
  /** Subscriptions the NATS server holds on the target's doorbell (the operator's, nobody else's). */
  const bellSubs = async () => {
    const r = await fetch(`${nats.monitorUrl}/subsz?subs=1`);
    const body = (await r.json()) as { subscriptions_list?: { subject: string }[] };
    return (body.subscriptions_list ?? []).filter((x) => x.subject === SUBJECT).length;
  };
  // replicas 2 keeps the pup a controller either way (its Deployment selector is immutable).
  const setStrategy = (strategy: string) =>
    admin.mergePatch('Agent', NS3, 'fresh', { spec: { strategy, replicas: 2 } }, 'test');

  beforeAll(async () => {
    nats = await startNats();
    nc = await connect({ servers: nats.url });
    await admin.create({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: NS3 } });
    bell = await startOperator(kube, NS3, {
      claims: new PostgresBacklogReader(async () => pgs.url),
      wakeups: new NatsWakeups(async () => nats.url),
      // Ten minutes: a Job within the test's limits can only come from the doorbell.
      pollMs: 600_000,
    });
    await admin.create(holtObject(NS3, 'fb'));
  });

  afterAll(async () => {
    await bell?.stop();
    await nc?.close();
    await nats?.stop();
  });

  it('a row enqueued after the agent settled → its Job once the doorbell rings', async () => {
    await admin.create<KubeObject>(freshAgent(NS3, 'fb', 1));
    await eventually('the doorbell subscription', async () => ((await bellSubs()) === 1 ? true : undefined));
    // Quiet first: the pup Deployment's rollout status (controller-manager) would queue the agent.
    await eventually('pup rollout status settled', () => {
      const st = bell.cache.get('Deployment', NS3, 'fresh')?.status as
        | { updatedReplicas?: number; conditions?: { type: string }[] }
        | undefined;
      return st?.updatedReplicas === 1 && st.conditions?.some((c) => c.type === 'Available')
        ? true
        : undefined;
    });
    await bell.settled();
    expect(await jobs(NS3)).toEqual([]);
    await enqueue('b-1', 'fb');
    // Nothing else queues the agent now: the row alone makes no Job until the bell rings.
    const made = await eventually('a claim job after the bell', async () => {
      ringDoorbell(nc, 'fb', 'fresh', 'enqueue');
      const l = await jobs(NS3);
      return l.length === 1 ? l : undefined;
    });
    expect(made.map(claimOf)).toEqual(['b-1']);
  });

  it('subscriptions follow the Agent: strategy change, leadership, deletion', async () => {
    await setStrategy('reuse');
    await eventually('unsubscribed (reuse)', async () => ((await bellSubs()) === 0 ? true : undefined));
    await setStrategy('fresh_per_call');
    await eventually('subscribed again', async () => ((await bellSubs()) === 1 ? true : undefined));
    await bell.stopControllers();
    await eventually('unsubscribed (not leading)', async () => ((await bellSubs()) === 0 ? true : undefined));
    bell.startControllers();
    await eventually('subscribed (leading)', async () => ((await bellSubs()) === 1 ? true : undefined));
    await admin.delete('Agent', NS3, 'fresh');
    await eventually('unsubscribed (deleted)', async () => ((await bellSubs()) === 0 ? true : undefined));
  });
});

describe('finishedClaimJobs: which claim Jobs are done with (pure)', () => {
  const job = (name: string, claim: string, epoch: string | undefined, status: Record<string, unknown>) =>
    ({
      apiVersion: 'batch/v1',
      kind: 'Job',
      metadata: { name, labels: epoch === undefined ? {} : { [CLAIM_EPOCH_LABEL]: epoch } },
      spec: { template: { spec: { containers: [{ args: ['pup', '--execute-claim', claim] }] } } },
      status,
    }) as KubeObject;
  const ok = { succeeded: 1 };
  const failed = { conditions: [{ type: 'Failed', status: 'True' }] };

  it('deletes succeeded Jobs whose attempt is over; keeps running, failed, still-pending and unlabelled ones', () => {
    const jobsIn = [
      job('done', 'a', '0', ok), // row done: over
      job('old-attempt', 'b', '0', ok), // row pending again, at epoch 1: over
      job('same-attempt', 'c', '2', ok), // row still pending at its epoch: back-off, kept
      job('running', 'd', '0', { active: 1 }),
      job('failed', 'e', '0', failed), // kept for its pods' logs (TTL)
      job('unlabelled', 'f', undefined, ok), // from before the epoch label (TTL)
    ];
    const pending = [
      { claimId: 'b', epoch: 1 },
      { claimId: 'c', epoch: 2 },
      { claimId: 'd', epoch: 0 },
    ];
    expect(finishedClaimJobs(jobsIn, pending).map((j) => j.metadata.name)).toEqual(['done', 'old-attempt']);
  });
});
