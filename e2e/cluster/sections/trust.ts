import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect, it } from 'vitest';
import { spawnServer } from '../../../test/harness/proc.ts';
import { eventually } from '../../../test/harness/wait.ts';
import {
  CLUSTER_WAIT,
  c,
  getJson,
  holt,
  kubectl,
  NS,
  progress,
  ROOT,
  run,
  trailOf,
  waitHoltReady,
} from '../ctx.ts';
import { tcpTarget } from '../fixtures.ts';
import { agentDoc, holtLabel, trustManifests, yamlDocs } from '../manifests.ts';

/** The real cluster: trust boundaries and network policies. */
export function trustTests(): void {
  it('trust boundary: a hostile tool in the agent container finds no credential and no store lets it in', async () => {
    await kubectl(['apply', '-f', '-'], trustManifests());
    await waitHoltReady('trust', 1);
    const out = await holt('trust', ['forage', '--goal', 'look around', '--watch']);
    expect(out).toContain('Workflow completed');
    const art = (await trailOf('trust')).find((a) => a.type === 'ProbeReport');
    const report = JSON.parse(art?.payload ?? '{}') as {
      texts: string;
      seen: { environ: number; cmdline: number };
      attempts: { store: string; ok: boolean }[];
    };
    // Every credential of the Holt: each principal's password on every store (and the superuser's).
    const secrets: string[] = [];
    for (const s of ['trust-redis', 'trust-nats', 'trust-postgres-app']) {
      const data = (await getJson<{ data: Record<string, string> }>(['secret', s]))?.data ?? {};
      for (const [k, v] of Object.entries(data))
        if (k.endsWith('password')) secrets.push(Buffer.from(v, 'base64').toString());
    }
    // Redis and NATS: admin, orchestrator, pup, operator, tool; Postgres: superuser, owner, orchestrator,
    // pup, operator.
    expect(secrets.length).toBe(5 + 5 + 5);
    expect(report.texts).toContain('HOLT_AGENT_NAME=Prober');
    expect(report.texts).toContain('DECLARED_FOR_TOOLS=visible');
    expect(report.texts).toMatch(/HOLT_CALL_ID=[0-9a-f-]{36}/);
    // Its own container only: the runner is there, the pup (another container, another PID namespace) is not.
    expect(report.texts).toContain('tool-runner');
    expect(report.texts).not.toContain('HOLT_TOOL_RUNNER_SOCKET');
    for (const secret of secrets) expect(report.texts).not.toContain(secret);
    // The report travels as an artefact, which the pup scrubs of what it holds: a found pup password
    // would arrive as this mark, never as itself.
    expect(report.texts).not.toContain('[redacted]');
    expect(report.seen.environ).toBeGreaterThan(1);
    expect(new Set(report.attempts.map((a) => a.store))).toEqual(new Set(['redis', 'nats', 'postgres']));
    expect(report.attempts.filter((a) => a.ok)).toEqual([]);
  }, 600_000);

  it('trust boundary: a tool that plants fsmonitor, uploadpack, a filter and hooks in .git and returns ":README" gets a Failure; nothing it planted runs in the pup or the runner', async () => {
    // One agent on the trust Holt's stores at a time: the prober steps aside and comes back after.
    await kubectl(['delete', 'agent', 'trust-prober', '--wait=true']);
    const onGoals =
      "let s='';process.stdin.on('data',(d)=>{s+=d}).on('end',()=>process.stdout.write(JSON.parse(s).type==='GoalDefined'?'exclusive':'ignore'))";
    const manifests = [
      {
        apiVersion: 'v1',
        kind: 'ConfigMap',
        metadata: { name: 'trust-plant', labels: holtLabel('trust') },
        data: {
          'git-plant.mjs': readFileSync(join(ROOT, 'test', 'fixtures', 'agents', 'git-plant.mjs'), 'utf8'),
        },
      },
      agentDoc('trust-planter', 'trust', {
        role: 'Planter',
        command: ['node', '/plant/git-plant.mjs', 'goal'],
        bidding: { script: ['node', '-e', onGoals] },
        workspace: { mode: 'rw' },
        volumes: [{ name: 'plant', configMap: 'trust-plant', mountPath: '/plant' }],
      }),
    ];
    await kubectl(['apply', '-f', '-'], yamlDocs(manifests));
    try {
      await waitHoltReady('trust', 1);
      /** The Planter's artefact made of the goal `mode` (the fixture takes its mode from the goal). */
      const made = async (mode: string) => {
        await holt('trust', ['forage', '--goal', mode]);
        return eventually(
          `the Planter's artefact for ${mode}`,
          async () => {
            const all = await trailOf('trust');
            const g = all.find((a) => a.type === 'GoalDefined' && a.payload === mode);
            return (
              g && all.find((a) => a.source_artefacts.includes(g.id) && a.produced_by_role === 'Planter')
            );
          },
          CLUSTER_WAIT,
        );
      };
      const good = await made('head');
      expect(good).toMatchObject({ type: 'CodeCommit', payload: expect.stringMatching(/^[0-9a-f]{40}$/) });
      const failed = await made('name');
      expect(failed).toMatchObject({ structural_type: 'Failure', type: 'ToolExecutionFailure' });
      expect(JSON.parse(failed.payload).reason).toMatch(
        /git commit validation failed for ":README": not a full commit id/,
      );
      // The tool's own look at .git: the dump no plant ever wrote, and its naive `git status` (the
      // control) runs the plant, so it was armed the whole time.
      const report = await made('report');
      expect(report.type).toBe('PlantReport');
      expect(report.payload).not.toContain('[redacted]');
      expect(JSON.parse(report.payload)).toEqual({ dump: null, control: true });
    } finally {
      await kubectl(['delete', 'agent', 'trust-planter', '--wait=true']).catch(() => undefined);
      await kubectl(['apply', '-f', '-'], trustManifests());
    }
  }, 600_000);

  it('network policies, enforced (kube-router on every node): an egress agent reaches what its Agent declares, not the API server, not the metadata address, not another pod', async () => {
    const local = c.local;
    // A stand-in for the cloud metadata service, inside each node's own namespace (the pods' gateway).
    const metadata = (local?.nodes ?? []).map((n) => {
      const ip = (...a: string[]) => run('ip', ['-n', n.plan.netns, ...a]);
      return {
        add: async () => {
          await ip('addr', 'add', '169.254.169.254/32', 'dev', 'lo');
          return spawnServer({
            name: `${n.plan.name}-metadata`,
            command: 'nsenter',
            args: [
              `--net=/run/netns/${n.plan.netns}`,
              '--',
              process.execPath,
              '-e',
              "require('node:net').createServer((s) => s.on('error', () => {}).end('metadata\\n')).listen(80, '169.254.169.254')",
            ],
            dir: local!.clusterDir,
          });
        },
        remove: () => ip('addr', 'del', '169.254.169.254/32', 'dev', 'lo').catch(() => undefined),
      };
    });
    const servers = [];
    try {
      for (const m of metadata) servers.push(await m.add());
      await kubectl(['apply', '-f', '-'], [tcpTarget('np-allowed'), tcpTarget('np-other')].join('---\n'));
      await kubectl(['rollout', 'status', 'deploy/np-allowed', 'deploy/np-other', '--timeout=180s']);
      // The API server's own address and port, behind the kubernetes Service.
      const ep = JSON.parse(
        await c.kubectl(['-n', 'default', 'get', 'endpoints', 'kubernetes', '-o', 'json']),
      ) as { subsets: { addresses: { ip: string }[]; ports: { port: number }[] }[] };
      const api = { ip: ep.subsets[0]!.addresses[0]!.ip, port: ep.subsets[0]!.ports[0]!.port };
      // The cluster's DNS Service, asked directly (a tool need not use the pod's resolv.conf).
      const dnsIp = (
        await c.kubectl([
          '-n',
          'kube-system',
          'get',
          'svc',
          '-l',
          'k8s-app=kube-dns',
          '-o',
          'jsonpath={.items[0].spec.clusterIP}',
        ])
      ).trim();
      const dnsTargets = [
        { name: 'dnsServer', dns: dnsIp, query: `holt-exfil-${Date.now()}.example.com` },
        { name: 'dnsResolver', resolve: 'kubernetes.default.svc.cluster.local' },
      ];
      const targets = [
        { name: 'declared', host: `np-allowed.${NS}.svc`, port: 8080 },
        { name: 'undeclared', host: `np-other.${NS}.svc`, port: 8080 },
        { name: 'apiService', host: 'kubernetes.default.svc', port: 443 },
        { name: 'apiServer', host: api.ip, port: api.port },
        ...(metadata.length ? [{ name: 'metadata', host: '169.254.169.254', port: 80 }] : []),
        ...dnsTargets,
      ];
      // The control: from a pod no policy selects, every target answers (once the Services have their
      // endpoints: a rollout is done before kube-proxy routes to it).
      const probe = async () =>
        JSON.parse(
          await kubectl([
            'exec',
            'deploy/np-other',
            '--',
            '/opt/holt/bin/node',
            '/srv/app/net-probe.mjs',
            JSON.stringify(targets),
            '--plain',
          ]),
        ) as Record<string, { ok: boolean; error?: string }>;
      let control: Record<string, { ok: boolean; error?: string }> = {};
      await eventually(
        'every target reachable from a pod no policy selects',
        async () => {
          control = await probe();
          return targets.every((t) => control[t.name]?.ok) ? true : undefined;
        },
        { timeoutMs: 90_000, intervalMs: 2_000 },
      ).catch(() => undefined);
      for (const t of targets) expect(control[t.name], `control: ${t.name}`).toMatchObject({ ok: true });

      // The agent: egress declared to the np-allowed pods, on ports that would let the others through.
      await kubectl(['delete', 'agent', 'trust-prober', '--wait=true']);
      await kubectl(
        ['apply', '-f', '-'],
        yamlDocs([
          agentDoc('trust-netprober', 'trust', {
            role: 'NetProber',
            command: ['node', '/probe/net-probe.mjs', JSON.stringify(targets)],
            bidding: { strategy: 'exclusive' },
            egress: true,
            // The ports of every target: what stops the others must be the addresses, not the ports.
            egressTo: { pods: [{ labels: { app: 'np-allowed' } }], ports: [8080, 443, api.port, 80] },
            volumes: [{ name: 'probe', configMap: 'np-allowed', mountPath: '/probe' }],
          }),
        ]),
      );
      await waitHoltReady('trust', 1);
      const out = await holt('trust', ['forage', '--goal', 'try the network', '--watch']);
      expect(out).toContain('Workflow completed');
      const art = (await trailOf('trust')).find((a) => a.type === 'NetProbe');
      const seen = JSON.parse(art?.payload ?? '{}') as Record<string, { ok: boolean; error?: string }>;
      progress(`netprobe from the agent: ${JSON.stringify(seen)}`);
      expect(seen.declared?.ok).toBe(true);
      // With egress it keeps cluster DNS (it found np-allowed by name).
      for (const t of dnsTargets) expect(seen[t.name], t.name).toMatchObject({ ok: true });
      for (const t of targets.filter(
        (x) => x.name !== 'declared' && !dnsTargets.some((d) => d.name === x.name),
      ))
        expect(seen[t.name], t.name).toMatchObject({ ok: false });

      // An agent without egress has no DNS: a query straight to the cluster's DNS Service gets no
      // answer (nothing goes out in a name), and its resolver knows no name. Its pup still finds the
      // stores (in /etc/hosts), so the workflow ends.
      await kubectl(['delete', 'agent', 'trust-netprober', '--wait=true']);
      await kubectl(
        ['apply', '-f', '-'],
        yamlDocs([
          agentDoc('trust-dnsprober', 'trust', {
            role: 'DnsProber',
            command: ['node', '/probe/net-probe.mjs', JSON.stringify(dnsTargets), '--type=DnsProbe'],
            bidding: { strategy: 'exclusive' },
            volumes: [{ name: 'probe', configMap: 'np-allowed', mountPath: '/probe' }],
          }),
        ]),
      );
      await waitHoltReady('trust', 1);
      const dnsOut = await holt('trust', ['forage', '--goal', 'try DNS', '--watch']);
      expect(dnsOut).toContain('Workflow completed');
      const dnsArt = (await trailOf('trust')).find((a) => a.type === 'DnsProbe');
      const dnsSeen = JSON.parse(dnsArt?.payload ?? '{}') as Record<string, { ok: boolean; error?: string }>;
      progress(`dns probe from an agent without egress: ${JSON.stringify(dnsSeen)}`);
      for (const t of dnsTargets) expect(dnsSeen[t.name], t.name).toMatchObject({ ok: false });
    } finally {
      for (const s of servers) await s.stop();
      for (const m of metadata) await m.remove();
    }
  }, 600_000);
}
