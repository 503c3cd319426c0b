import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type KubeCluster, startKube } from '../../../test/harness/kube.ts';
import { eventually } from '../../../test/harness/wait.ts';
import { KubeClient, type KubeObject } from '../kube/kube.ts';
import type { Operator } from '../operator.ts';
import { installCrds, startOperator } from '../testkit.ts';

const NS = 'dns-test';
let kube: KubeCluster;
let admin: KubeClient;
let op: Operator;

const obj = (kind: string, name: string, spec: Record<string, unknown>): KubeObject => ({
  apiVersion: 'holt.io/v1alpha1',
  kind,
  metadata: { name, namespace: NS },
  spec,
});
type PodSpec = {
  dnsPolicy?: string;
  hostAliases?: { ip: string; hostnames: string[] }[];
};
const template = async (name: string) => {
  const d = await admin.get('Deployment', NS, name);
  return (
    d?.spec as { template: { metadata: { labels: Record<string, string> }; spec: PodSpec } } | undefined
  )?.template;
};

beforeAll(async () => {
  kube = await startKube();
  admin = new KubeClient(kube.kubeconfig);
  await installCrds(admin);
  await admin.create({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: NS } });
  // Cluster DNS as the operator's pod has it, for one name: a collector whose Service it may not read.
  op = await startOperator(kube, NS, {
    resolveHost: async (host) => {
      if (host === 'viadns.elsewhere.svc') return '10.96.7.7';
      throw new Error(`NXDOMAIN ${host}`);
    },
  });
}, 120_000);

afterAll(async () => {
  await op?.stop();
  admin?.close();
  await kube?.stop();
});

describe('agent pods without DNS, on a real API server', () => {
  it("find their Holt's stores at the addresses the API server gave the store Services", async () => {
    // Created together: the Agent may be reconciled before the Services are; their arrival rewrites it.
    await admin.create(
      obj('Agent', 'd-quiet', { holt: 'd', command: ['true'], bidding: { strategy: 'claim' } }),
    );
    await admin.create(
      obj('Agent', 'd-talker', {
        holt: 'd',
        command: ['true'],
        bidding: { strategy: 'claim' },
        egress: true,
      }),
    );
    await admin.create(obj('Holt', 'd', {}));
    const ips: Record<string, string> = {};
    for (const s of ['redis', 'nats', 'postgres'])
      ips[s] = await eventually(
        `Service d-${s}`,
        async () =>
          ((await admin.get('Service', NS, `d-${s}`))?.spec as { clusterIP?: string } | undefined)?.clusterIP,
      );
    const quiet = await eventually('the quiet agent rewritten with every store', async () => {
      const t = await template('d-quiet');
      return t?.spec.hostAliases?.length === 3 ? t : undefined;
    });
    expect(quiet.metadata.labels['holt.io/dns']).toBe('deny');
    expect(quiet.spec.dnsPolicy).toBe('None');
    expect(quiet.spec.hostAliases).toEqual(
      ['redis', 'nats', 'postgres'].map((s) => ({
        ip: ips[s],
        hostnames: [`d-${s}`, `d-${s}.${NS}.svc`, `d-${s}.${NS}.svc.cluster.local`],
      })),
    );
    // With egress it resolves names as any pod does.
    const talker = await eventually('the egress agent', () => template('d-talker'));
    expect(talker.metadata.labels['holt.io/dns']).toBeUndefined();
    expect(talker.spec.hostAliases).toBeUndefined();
  });

  it('find a trace collector named as a Service by its address; a collector that has none is a Warning', async () => {
    await admin.create({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'obs' } });
    await admin.create({
      apiVersion: 'v1',
      kind: 'Service',
      metadata: { name: 'jaeger', namespace: 'obs' },
      spec: { selector: { app: 'jaeger' }, ports: [{ name: 'otlp-http', port: 4318 }] },
    });
    const ip = await eventually(
      'the collector Service address',
      async () =>
        ((await admin.get('Service', 'obs', 'jaeger'))?.spec as { clusterIP?: string } | undefined)
          ?.clusterIP,
    );
    await admin.create(obj('Holt', 't', { tracing: { endpoint: 'http://jaeger.obs.svc:4318' } }));
    await admin.create(
      obj('Agent', 't-quiet', { holt: 't', command: ['true'], bidding: { strategy: 'claim' } }),
    );
    const quiet = await eventually('the sealed agent with its stores and the collector', async () => {
      const t = await template('t-quiet');
      return t?.spec.hostAliases?.length === 4 ? t : undefined;
    });
    expect(quiet.spec.hostAliases).toContainEqual({ ip, hostnames: ['jaeger.obs.svc'] });

    // A collector Service that does not exist: the sealed agent goes without it, and says so.
    await admin.create(obj('Holt', 'u', { tracing: { endpoint: 'http://nowhere.obs.svc:4318' } }));
    await admin.create(
      obj('Agent', 'u-quiet', { holt: 'u', command: ['true'], bidding: { strategy: 'claim' } }),
    );
    const warning = await eventually('a CollectorUnresolved event', async () =>
      (await admin.list('Event', NS)).items.find(
        (e) =>
          (e as { reason?: string }).reason === 'CollectorUnresolved' &&
          (e as { regarding?: { name?: string } }).regarding?.name === 'u-quiet',
      ),
    );
    expect((warning as { note?: string }).note).toContain('obs/nowhere');
    const unresolved = await eventually('the sealed agent with its stores', async () => {
      const t = await template('u-quiet');
      return t?.spec.hostAliases?.length === 3 ? t : undefined;
    });
    expect(unresolved.spec.hostAliases?.flatMap((h) => h.hostnames)).not.toContain('nowhere.obs.svc');
  });

  it('find a collector whose Service the operator cannot read through its own DNS', async () => {
    await admin.create(obj('Holt', 'v', { tracing: { endpoint: 'http://viadns.elsewhere.svc:4318' } }));
    await admin.create(
      obj('Agent', 'v-quiet', { holt: 'v', command: ['true'], bidding: { strategy: 'claim' } }),
    );
    const t = await eventually('the sealed agent with its stores and the collector', async () => {
      const x = await template('v-quiet');
      return x?.spec.hostAliases?.length === 4 ? x : undefined;
    });
    expect(t.spec.hostAliases).toContainEqual({ ip: '10.96.7.7', hostnames: ['viadns.elsewhere.svc'] });
  });
});
