import { connect } from '@nats-io/transport-node';
import pg from 'pg';
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
import { DELETION_COST } from '../autoscale/loop.ts';
import { NatsWakeups } from '../autoscale/wakeup.ts';
import { KubeClient, type KubeObject, type ObjectRef, refOf, type Verb } from '../kube/kube.ts';
import { LeaderElector } from '../kube/leader.ts';
import type { CallContext } from '../kube/object-api.ts';
import type { Operator } from '../operator.ts';
import {
  holtObject,
  startKubeWithCrds,
  startOperator as startOperatorOn,
  writesOnResync,
} from '../testkit.ts';

const NS = 'pools';
let kube: KubeCluster;
let pgs: PostgresServer;
let nats: NatsServer;
let admin: KubeClient;
let op: Operator;
let inbox: InboxStore;

const get = (kind: string, name: string) => admin.get(kind, NS, name);
const replicasOf = (o: KubeObject | undefined) => (o?.spec as { replicas?: number } | undefined)?.replicas;
const pool = (name: string, spec: Record<string, unknown>): KubeObject => ({
  apiVersion: 'holt.io/v1alpha1',
  kind: 'WorkerPool',
  metadata: { name, namespace: NS },
  spec: { holt: 'wp', role: 'coder', ...spec },
});
let claimSeq = 0;
async function enqueue(target: string, n: number): Promise<void> {
  for (let i = 0; i < n; i++)
    await inbox.enqueue({
      instance: 'wp',
      workerTarget: target,
      claimId: `c-${target}-${claimSeq++}`,
      role: 'coder',
      claimType: 'claim',
      phase: 'parallel',
    });
}

/** An operator replica that leads at once (a new one after op.stop() is a leader change). */
async function startOperator(): Promise<Operator> {
  return startOperatorOn(kube, NS, {
    backlog: new PostgresBacklogReader(async () => pgs.url),
    wakeups: new NatsWakeups(async () => nats.url),
    // A long poll: scaling within seconds below can only come from the doorbell.
    autoscalePollMs: 60_000,
  });
}

beforeAll(async () => {
  let env: Awaited<ReturnType<typeof startKubeWithCrds>>;
  [env, pgs, nats] = await Promise.all([
    startKubeWithCrds(NS, { controllerManager: true }),
    startPostgres(),
    startNats(),
  ]);
  ({ kube, admin } = env);
  await migrate(pgs.url);
  inbox = InboxStore.connect(pgs.url, { max: 2 });
  op = await startOperator();
  await admin.create(holtObject(NS, 'wp'));
});

afterAll(async () => {
  await op?.stop();
  await inbox?.close();
  admin?.close();
  await Promise.all([kube?.stop(), pgs?.stop(), nats?.stop()]);
});

/** Runs `a` until it leads, then `b` as its standby; each gain and loss of leadership is logged, in order. */
async function leaderThenStandby(a: LeaderElector, b: LeaderElector): Promise<string[]> {
  const led: string[] = [];
  void a.run(
    () => led.push('a'),
    () => led.push('a-lost'),
  );
  await eventually('a leads', () => (a.isLeader ? true : undefined));
  void b.run(
    () => led.push('b'),
    () => led.push('b-lost'),
  );
  return led;
}

describe('WorkerPool reconciler and the built-in autoscaler', () => {
  it('create: a worker Deployment owned by the pool, workers in worker mode, status with the selector', async () => {
    const created = await admin.create(
      pool('coders', {
        target: 'coder',
        terminationGracePeriodSeconds: 120,
        autoscaling: {
          mode: 'builtin',
          maxReplicas: 4,
          targetBacklogPerReplica: 1,
          cooldownSeconds: 2,
          stabilizationSeconds: 0,
        },
      }),
    );
    const dep = await eventually('the worker deployment', () => get('Deployment', 'coders'));
    expect(dep.metadata.ownerReferences?.[0]).toMatchObject({
      kind: 'WorkerPool',
      uid: created.metadata.uid,
      controller: true,
    });
    const tpl = (
      dep.spec as {
        template: {
          spec: {
            terminationGracePeriodSeconds: number;
            containers: {
              env: { name: string; value?: string }[];
              securityContext: Record<string, unknown>;
            }[];
          };
        };
      }
    ).template.spec;
    expect(tpl.terminationGracePeriodSeconds).toBe(120);
    const env = Object.fromEntries(tpl.containers[0]!.env.map((e) => [e.name, e.value]));
    expect(env).toMatchObject({ HOLT_MODE: 'worker', HOLT_WORKER_TARGET: 'coder', HOLT_INSTANCE_NAME: 'wp' });
    expect(tpl.containers[0]!.securityContext).toMatchObject({
      readOnlyRootFilesystem: true,
      runAsNonRoot: true,
    });
    expect(replicasOf(dep)).toBe(0);
    const p = await eventually('pool status', async () => {
      const o = await get('WorkerPool', 'coders');
      return (o?.status as { selector?: string } | undefined)?.selector ? o : undefined;
    });
    expect((p.status as { selector: string }).selector).toBe(
      'app.kubernetes.io/instance=coders,app.kubernetes.io/component=worker',
    ); // The pods go without DNS: their /etc/hosts name the store Services, written into the template once
    // the operator has seen all three (dns.ts). Until then the template changes, and a rollout of pods
    // that never start (no kubelet here) would leave the old ReplicaSet's pods beside the new one's:
    // the later tests count the pool's pods, so they start from the settled template.
    await eventually(
      'the template to name every store',
      async () => {
        const d = await get('Deployment', 'coders');
        const t = d?.spec as { template?: { spec?: { hostAliases?: unknown[] } } } | undefined;
        return t?.template?.spec?.hostAliases?.length === 3 ? true : undefined;
      },
      { timeoutMs: 60_000 },
    );
  });

  it('backlog appears + doorbell → replicas change at once (poll interval is 60 s)', async () => {
    const t0 = Date.now();
    await enqueue('coder', 3);
    const nc = await connect({ servers: nats.url });
    // The doorbell subscription is made on the pool's first tick; ring until it is heard.
    const p = await eventually(
      'spec.replicas = 3',
      async () => {
        ringDoorbell(nc, 'wp', 'coder', 'enqueue');
        const o = await get('WorkerPool', 'coders');
        // spec.replicas is applied first and the status a moment after: wait for both.
        const st = o?.status as { desiredReplicas?: number } | undefined;
        return replicasOf(o) === 3 && st?.desiredReplicas === 3 ? o : undefined;
      },
      { timeoutMs: 20_000 },
    );
    await nc.close();
    console.log(`autoscale: backlog -> replicas 3 in ${Date.now() - t0} ms`);
    expect(p.status).toMatchObject({ backlog: 3, desiredReplicas: 3 });
    expect((p.status as { lastActiveTime?: string }).lastActiveTime).toMatch(/Z$/);
    await eventually('deployment follows', async () =>
      replicasOf(await get('Deployment', 'coders')) === 3 ? true : undefined,
    );
  });

  it('scale-in marks idle pods cheapest to delete, busy ones dearest, then shrinks', async () => {
    // The controller-manager's ReplicaSet makes them: a guard against a hang, sized for a loaded CI
    // machine (30 s ran out there once), never a speed check.
    const pods = await eventually(
      '3 worker pods (controller-manager)',
      async () => {
        const l = await admin.list('Pod', NS, { labelSelector: 'app.kubernetes.io/instance=coders' });
        return l.items.length === 3 ? l.items : undefined;
      },
      {
        timeoutMs: 120_000,
        // Which pods there are, of which ReplicaSet: a rollout leaves two sets side by side.
        describe: async () =>
          (await admin.list('Pod', NS, { labelSelector: 'app.kubernetes.io/instance=coders' })).items
            .map((p) => `${p.metadata.name} (${p.metadata.labels?.['pod-template-hash'] ?? '?'})`)
            .join(', ') || 'no pods',
      },
    );
    const busy = pods[0]!.metadata.name;
    const db = new pg.Client({ connectionString: pgs.url });
    await db.connect();
    // One row in flight on the busy pod, the others done.
    await db.query(
      `UPDATE holt.agent_inbox SET status = 'claimed', lease_owner = $1, lease_expires_at = now() + interval '1 hour'
       WHERE id = (SELECT min(id) FROM holt.agent_inbox WHERE worker_target = 'coder')`,
      [busy],
    );
    await db.query(
      `UPDATE holt.agent_inbox SET status = 'done' WHERE worker_target = 'coder' AND status = 'pending'`,
    );
    await db.end();
    op.autoscaler?.queue.add(`${NS}/coders`);
    await eventually(
      'replicas 1',
      async () => (replicasOf(await get('WorkerPool', 'coders')) === 1 ? true : undefined),
      { timeoutMs: 20_000 },
    );
    const after = await admin.list('Pod', NS, { labelSelector: 'app.kubernetes.io/instance=coders' });
    const costs = Object.fromEntries(
      after.items.map((p) => [p.metadata.name, p.metadata.annotations?.[DELETION_COST]]),
    );
    expect(costs[busy]).toBe('1000');
    expect(
      Object.entries(costs)
        .filter(([n]) => n !== busy)
        .every(([, c]) => c === '0' || c === undefined),
    ).toBe(true);
  });

  it('steady state: no writes while nothing changes', async () => {
    // An idle pool is the steady state (a claim in flight keeps a pool active, and an active
    // pool's lastActiveTime moves). Finish the work, let the cooldown run out, rest at zero.
    const db = new pg.Client({ connectionString: pgs.url });
    await db.connect();
    await db.query(`UPDATE holt.agent_inbox SET status = 'done' WHERE worker_target = 'coder'`);
    await db.end();
    await eventually(
      'the pool at rest: 0 replicas, deployment and status caught up',
      async () => {
        op.autoscaler?.queue.add(`${NS}/coders`);
        const [p, d] = [await get('WorkerPool', 'coders'), await get('Deployment', 'coders')];
        const st = (p?.status ?? {}) as { replicas?: number; backlog?: number };
        return replicasOf(p) === 0 && replicasOf(d) === 0 && st.replicas === 0 && st.backlog === 0
          ? true
          : undefined;
      },
      { timeoutMs: 20_000 },
    );
    // Every reconciler (and, for pools, an autoscaler tick) runs again: nothing is written.
    expect(await writesOnResync(op)).toBe(0);
  });

  it('a new leader keeps the cooldown: lastActiveTime comes from status, not memory', async () => {
    const key = `${NS}/cool`;
    const tick = async () => {
      op.autoscaler?.queue.add(key);
      await op.settled();
    };
    await admin.create(
      pool('cool', {
        target: 'cool',
        autoscaling: {
          mode: 'builtin',
          maxReplicas: 3,
          targetBacklogPerReplica: 1,
          cooldownSeconds: 3600,
          stabilizationSeconds: 0,
        },
      }),
    );
    await enqueue('cool', 1);
    const active = await eventually('active: 1 replica, lastActiveTime in status', async () => {
      await tick();
      const p = await get('WorkerPool', 'cool');
      const st = p?.status as { lastActiveTime?: string } | undefined;
      return replicasOf(p) === 1 && st?.lastActiveTime ? st.lastActiveTime : undefined;
    });
    // The work is done; within the (hour-long) cooldown the pool keeps its replica.
    await inbox.pool.query(`UPDATE holt.agent_inbox SET status = 'done' WHERE worker_target = 'cool'`);
    await tick();
    const idle = await get('WorkerPool', 'cool');
    expect(replicasOf(idle)).toBe(1);
    // The end of activity may restamp lastActiveTime (a later second than `active`): that is the value
    // a new leader must keep.
    const kept = (idle?.status as { lastActiveTime?: string } | undefined)?.lastActiveTime;
    expect(kept !== undefined && Date.parse(kept) >= Date.parse(active)).toBe(true);

    // Leader change: a new operator, no memory of the pool, reads lastActiveTime from status.
    await op.stop();
    op = await startOperator();
    await tick();
    const p = await get('WorkerPool', 'cool');
    expect(replicasOf(p)).toBe(1);
    expect(p?.status).toMatchObject({ lastActiveTime: kept, backlog: 0 });
    // Fields the autoscaler wrote once (at the 0 -> 1 scale) survive its later status applies.
    expect((p?.status as { lastScaleTime?: string } | undefined)?.lastScaleTime).toMatch(/Z$/);

    // Proof that status is what it reads: while no operator runs, lastActiveTime becomes two hours
    // old; the first tick of the next leader scales to zero (the cooldown is over).
    await op.stop();
    const old = new Date(Date.now() - 2 * 3600_000).toISOString().replace(/\.\d{3}Z$/, 'Z');
    await admin.patch(
      refOf('WorkerPool', NS, 'cool'),
      { status: { lastActiveTime: old } },
      { subresource: 'status' },
    );
    op = await startOperator();
    await eventually('scaled to zero by the new leader', async () => {
      await tick();
      return replicasOf(await get('WorkerPool', 'cool')) === 0 ? true : undefined;
    });
    await admin.delete('WorkerPool', NS, 'cool');
  });

  it('external (HPA) mode: the autoscaler leaves spec.replicas alone; /scale drives the Deployment', async () => {
    await admin.create(
      pool('hpa', { target: 'hpa', replicas: 2, autoscaling: { mode: 'external', maxReplicas: 5 } }),
    );
    await enqueue('hpa', 4);
    await eventually('deployment with 2', async () =>
      replicasOf(await get('Deployment', 'hpa')) === 2 ? true : undefined,
    );
    op.autoscaler?.queue.add(`${NS}/hpa`);
    await new Promise((r) => setTimeout(r, 1000));
    const p = await get('WorkerPool', 'hpa');
    expect(replicasOf(p)).toBe(2);
    expect(JSON.stringify(p?.metadata)).not.toContain('holt-autoscaler');
    await kube.kubectl(['-n', NS, 'scale', 'workerpool/hpa', '--replicas=3']);
    await eventually('deployment follows /scale', async () =>
      replicasOf(await get('Deployment', 'hpa')) === 3 ? true : undefined,
    );
    const s = JSON.parse(
      await kube.kubectl([
        '-n',
        NS,
        'get',
        '--raw',
        `/apis/holt.io/v1alpha1/namespaces/${NS}/workerpools/hpa/scale`,
      ]),
    ) as { spec: { replicas: number } };
    expect(s.spec.replicas).toBe(3);
  });

  it('delete: the worker Deployment goes with its pool (GC)', async () => {
    await admin.delete('WorkerPool', NS, 'hpa');
    await eventually(
      'deployment collected',
      async () => ((await get('Deployment', 'hpa')) ? undefined : true),
      { timeoutMs: 60_000 },
    );
  });

  it('leader election: a standby waits, takes over when the leader releases the Lease', async () => {
    const mk = (id: string) =>
      new LeaderElector(
        new KubeClient(kube.kubeconfig),
        {
          namespace: NS,
          name: 'holt-operator',
          identity: id,
          retryPeriodMs: 200,
          leaseDurationMs: 3000,
          renewDeadlineMs: 2000,
        },
        silentLogger(),
      );
    const a = mk('a');
    const b = mk('b');
    const led = await leaderThenStandby(a, b);
    await new Promise((r) => setTimeout(r, 1000));
    expect(b.isLeader).toBe(false);
    await a.stop();
    await eventually('b leads', () => (b.isLeader ? true : undefined), { timeoutMs: 10_000 });
    await b.stop();
    expect(led).toEqual(['a', 'b']);
    const lease = await get('Lease', 'holt-operator');
    expect((lease?.spec as { leaseTransitions: number } | undefined)?.leaseTransitions).toBe(1);
  });

  it('leader election: a leader whose renewals stall steps down before a standby can take the Lease', async () => {
    // The leader's API server stops answering (requests hang, no error): it must stop leading on
    // its own clock, before the standby (which sees the lease unrenewed) takes over.
    class StallingClient extends KubeClient {
      stalled = false;
      protected override send<T>(
        verb: Verb,
        ref: ObjectRef,
        call: () => Promise<unknown>,
        ctx: CallContext = {},
      ): Promise<T> {
        if (!this.stalled) return super.send(verb, ref, call, ctx);
        const signal = ctx.signal;
        return new Promise((_, reject) =>
          signal?.addEventListener('abort', () => reject(new Error('aborted')), { once: true }),
        );
      }
    }
    const opts = (id: string) => ({
      namespace: NS,
      name: 'stall-lease',
      identity: id,
      retryPeriodMs: 200,
      leaseDurationMs: 3000,
      renewDeadlineMs: 2000,
    });
    const stalling = new StallingClient(kube.kubeconfig);
    const a = new LeaderElector(stalling, opts('a'), silentLogger());
    const b = new LeaderElector(new KubeClient(kube.kubeconfig), opts('b'), silentLogger());
    const led = await leaderThenStandby(a, b);
    stalling.stalled = true;
    await eventually('b leads', () => (b.isLeader ? true : undefined), { timeoutMs: 20_000 });
    // Order, not timing: the stalled leader had already stepped down when the standby took over.
    expect(led).toEqual(['a', 'a-lost', 'b']);
    expect(a.isLeader).toBe(false);
    await a.stop();
    await b.stop();
  });
});
