import { KubeConfig, Watch } from '@kubernetes/client-node';
import { expect, it } from 'vitest';
import { eventually } from '../../../test/harness/wait.ts';
import {
  CLUSTER_WAIT,
  c,
  describeNs,
  getJson,
  holt,
  kubectl,
  NS,
  type Pod,
  pods,
  progress,
  redisCli,
  trailOf,
} from '../ctx.ts';
import { agentDoc, holtDoc, yamlDocs } from '../manifests.ts';

const HOLT = 'jobs';
const AGENT = 'jobs-runner';

/**
 * A Holt of one fresh_per_call agent. Its tool writes the Terminal result naming the pod it ran in.
 * "kill me" never finishes on its first try (a marker in the shared workspace says it was tried):
 * the test kills that pod, and the retry finishes it.
 */
function jobsManifests(): string {
  const tool = [
    'in=$(cat)',
    'case "$in" in',
    '  *"kill me"*) [ -e /workspace/.e2e-tried ] || { touch /workspace/.e2e-tried; sleep 600; } ;;',
    '  *) sleep 4 ;;',
    'esac',
    `printf '{"artefact_type":"Ran","artefact_payload":"%s","summary":"ran","structural_type":"Terminal"}\\n' "$(cat /proc/sys/kernel/hostname)"`,
  ].join('\n');
  return yamlDocs([
    holtDoc(HOLT, { orchestrator: { bidTimeoutSeconds: 120 } }),
    agentDoc(AGENT, HOLT, {
      role: 'Runner',
      command: ['sh', '-c', tool],
      bidding: { strategy: 'exclusive' },
      strategy: 'fresh_per_call',
      replicas: 4,
      workspace: { mode: 'rw' },
    }),
  ]);
}

type HoltObj = {
  status?: {
    phase?: string;
    agents?: { total?: number; ready?: number };
    conditions?: { type: string; status: string; reason?: string; message?: string }[];
  };
};

/**
 * Every status the Holt takes, as `phase|Ready reason|Ready message`: a watch from the resourceVersion
 * of a list taken before the Holt exists, so no write escapes it. A watch the client or the server ends
 * (client-node's request timeout, a loaded API server) is opened again from the last version seen.
 */
async function watchHolt(): Promise<{ lines: string[]; error: () => string | undefined; stop: () => void }> {
  const kc = new KubeConfig();
  kc.loadFromFile(c.kubeconfigPath);
  let rv = (await c.kubectl(['-n', NS, 'get', 'holts', '-o', 'jsonpath={.metadata.resourceVersion}'])).trim();
  const lines: string[] = [];
  let error: string | undefined;
  let stopped = false;
  let current: AbortController | undefined;
  let reopened = 0;
  const open = async (): Promise<void> => {
    current = await new Watch(kc).watch(
      `/apis/holt.io/v1alpha1/namespaces/${NS}/holts`,
      { fieldSelector: `metadata.name=${HOLT}`, resourceVersion: rv },
      (_type, obj: HoltObj & { metadata?: { resourceVersion?: string } }) => {
        if (obj.metadata?.resourceVersion) rv = obj.metadata.resourceVersion;
        const r = obj.status?.conditions?.find((k) => k.type === 'Ready');
        lines.push(`${obj.status?.phase ?? ''}|${r?.reason ?? ''}|${r?.message ?? ''}`);
      },
      (e: unknown) => {
        if (stopped) return;
        // Ended, with or without an error: open it again from where it was, a bounded number of times.
        if (++reopened > 20) {
          error = `the watch ended ${reopened} times, last: ${e instanceof Error ? e.message : String(e)}`;
          return;
        }
        open().catch((x: unknown) => {
          error = `the watch could not be opened again: ${x instanceof Error ? x.message : String(x)}`;
        });
      },
    );
  };
  await open();
  return {
    lines,
    error: () => error,
    stop: () => {
      stopped = true;
      current?.abort();
    },
  };
}

const psql = (sql: string) =>
  kubectl(['exec', `${HOLT}-postgres-0`, '--', 'psql', '-U', 'holt', '-d', 'holt', '-At', '-c', sql]).then(
    (o) => o.trim(),
  );
const redis = (...args: string[]) => redisCli(HOLT, ...args);
const JOB_SELECTOR = `holt.io/instance=${HOLT},app.kubernetes.io/component=claim-job`;

/** The inbox rows and claim Jobs of the Holt first (what a stuck claim waits on), then the namespace. */
async function inboxAndJobs(): Promise<string> {
  const rows = await psql(
    `SELECT i.claim_id, i.status, i.attempts, i.lease_owner, i.last_error, h.turn_epoch, h.status
     FROM holt.agent_inbox i LEFT JOIN holt.agent_state_head h ON h.instance = i.instance AND h.actor_id = i.actor_id
     WHERE i.instance = '${HOLT}' ORDER BY i.id`,
  ).catch((e: unknown) => `inbox unreadable: ${String(e)}`);
  const jobs = await c.kubectlResult(['-n', NS, 'get', 'jobs,pods', '-l', JOB_SELECTOR, '-o', 'wide'], {
    allowFail: true,
  });
  return `inbox (claim|status|attempts|owner|error|epoch|head):\n${rows}\nclaim jobs:\n${jobs.stdout}\n${await describeNs()}`;
}

/** The real cluster: fresh_per_call agents, one Job per claim on a real kubelet; Ready from real pods. */
export function jobsTests(): void {
  it.concurrent('fresh_per_call: Ready as real pods become ready; each claim in its own Job pod, a killed one retried, Jobs cleaned up', async () => {
    const t0 = Date.now();
    // Ready, proven on real pods: the Holt is Progressing until its stores and its Agent's pup are
    // Ready (the kubelet's probes), then Ready. (holt.test.ts checks the same logic on an API server alone.)
    const watch = await watchHolt();
    try {
      await kubectl(['apply', '-f', '-'], jobsManifests());
      await eventually(
        `Holt ${HOLT} Ready`,
        async () => {
          const e = watch.error();
          if (e) throw new Error(`${e}; seen: ${watch.lines.join(' / ')}`);
          return watch.lines.some((l) => l.startsWith('Ready|')) ? true : undefined;
        },
        { ...CLUSTER_WAIT, timeoutMs: 420_000 },
      );
    } finally {
      watch.stop();
    }
    const firstReady = watch.lines.findIndex((l) => l.startsWith('Ready|'));
    const before = watch.lines.slice(0, firstReady).filter((l) => l.startsWith('Progressing|'));
    expect(before.length).toBeGreaterThan(0);
    for (const l of before) expect(l).toMatch(/^Progressing\|ComponentsNotReady\|waiting for \S/);
    expect(watch.lines[firstReady]).toBe('Ready|AllComponentsReady|all components ready');
    const h = await getJson<HoltObj>(['holt', HOLT]);
    expect(h?.status?.agents).toMatchObject({ total: 1, ready: 1 });
    expect(h?.status?.conditions?.find((k) => k.type === 'AgentsReady')).toMatchObject({
      status: 'True',
      message: '1 agents ready',
    });
    // What made it Ready: the real kubelet's readiness of the pods, the Agent's pup among them.
    const ready = (p: Pod) => (p.status.containerStatuses ?? []).every((s) => s.ready);
    const pup = await pods(`holt.io/instance=${HOLT},holt.io/role=Runner`);
    expect(pup.filter((p) => p.status.phase === 'Running' && ready(p)).length).toBeGreaterThan(0);
    progress(
      `${HOLT}: Ready after ${before.length} Progressing status(es), ${Math.round((Date.now() - t0) / 1000)} s`,
    );

    const goals = ['run 0', 'run 1', 'run 2', 'kill me'];
    for (const g of goals) await holt(HOLT, ['forage', '--goal', g]);
    // The claim that never finishes by itself: its Job pod holds the row and its tool has started.
    const goalIds = new Map(
      (await trailOf(HOLT)).filter((a) => a.type === 'GoalDefined').map((a) => [a.payload, a.id]),
    );
    const claimOf = async (goal: string) => {
      const id = await redis('GET', `holt:${HOLT}:claim_by_artefact:${goalIds.get(goal)}`);
      return id || undefined;
    };
    const killClaim = await eventually('the claim of "kill me"', () => claimOf('kill me'), CLUSTER_WAIT);
    const victim = await eventually(
      'a Job pod running "kill me", its tool started',
      async () => {
        const owner = await psql(
          `SELECT lease_owner FROM holt.agent_inbox WHERE instance = '${HOLT}' AND claim_id = '${killClaim}' AND status = 'claimed'`,
        );
        if (!owner) return undefined;
        const tried = await c.kubectlResult(
          ['-n', NS, 'exec', owner, '-c', 'pup', '--', 'sh', '-c', 'test -e /workspace/.e2e-tried'],
          {
            allowFail: true,
          },
        );
        return tried.code === 0 ? owner : undefined;
      },
      CLUSTER_WAIT,
    );
    await kubectl(['delete', 'pod', victim, '--grace-period=0', '--force', '--wait=false']);
    progress(`${HOLT}: killed Job pod ${victim} mid-claim`);

    const trail = await eventually(
      `the ${goals.length} claims of ${HOLT} to finish`,
      async () => {
        const trail = await trailOf(HOLT);
        const t = trail.filter((a) => a.structural_type === 'Terminal');
        return t.length >= goals.length ? trail : undefined;
      },
      { ...CLUSTER_WAIT, timeoutMs: 300_000, describe: inboxAndJobs },
    );
    expect(trail.filter((a) => a.structural_type === 'Failure')).toEqual([]);
    const ranIn = new Map<string, string>();
    let killedRow = '';
    for (const g of goals) {
      const mine = trail.filter(
        (a) => a.structural_type === 'Terminal' && a.source_artefacts.includes(goalIds.get(g) ?? ''),
      );
      // Exactly one result per claim, the killed one included.
      expect(mine, g).toHaveLength(1);
      ranIn.set(g, mine[0]!.payload);
    }
    // Each claim ran in a pod of its own Job: Jobs are named by the claim and its attempt (the row's
    // turn epoch before the pod took it), pods by their Job plus a suffix.
    for (const g of goals) {
      const claim = (await claimOf(g)) ?? '';
      const prefix = `${AGENT}-${claim
        .replace(/[^a-z0-9]/gi, '')
        .slice(0, 12)
        .toLowerCase()}-`;
      expect(ranIn.get(g), g).toMatch(new RegExp(`^${prefix}\\d+-[a-z0-9]{5}$`));
      const row = await psql(
        `SELECT status || ':' || attempts FROM holt.agent_inbox WHERE instance = '${HOLT}' AND claim_id = '${claim}'`,
      );
      // One attempt each, so one Job each (the first attempt's, epoch 0); the killed one was retried.
      if (g === 'kill me') {
        expect(row).toMatch(/^done:\d+$/);
        killedRow = row;
      } else {
        expect(row, g).toBe('done:1');
        expect(ranIn.get(g), g).toMatch(new RegExp(`^${prefix}0-[a-z0-9]{5}$`));
      }
    }
    expect(new Set(ranIn.values()).size).toBe(goals.length);
    expect(ranIn.get('kill me')).not.toBe(victim);
    progress(
      `${HOLT}: ran in ${[...ranIn.entries()].map(([g, p]) => `${g}→${p}`).join(', ')} (kill me: status:attempts ${killedRow})`,
    );

    // Cleaned up: every claim's Job, and its pods, deleted once its claim finished.
    await eventually(
      'the claim Jobs and their pods deleted',
      async () => {
        const jobs = await getJson<{ items: unknown[] }>(['jobs', '-l', JOB_SELECTOR]);
        const left = await pods(JOB_SELECTOR);
        return jobs?.items.length === 0 && left.length === 0 ? true : undefined;
      },
      CLUSTER_WAIT,
    );

    await kubectl(['delete', 'holt', HOLT, '--wait=true', '--timeout=180s']);
    await kubectl(['delete', 'agents', '-l', `e2e.holt.io/holt=${HOLT}`, '--wait=true', '--timeout=180s']);
    await eventually(
      `every pod and volume of ${HOLT} gone`,
      async () => {
        const left = await c.kubectl([
          '-n',
          NS,
          'get',
          'pods,pvc,jobs',
          '-l',
          `holt.io/instance=${HOLT}`,
          '-o',
          'name',
        ]);
        return left.trim() === '' ? true : undefined;
      },
      CLUSTER_WAIT,
    );
    progress(`${HOLT}: section done in ${Math.round((Date.now() - t0) / 1000)} s`);
  }, 900_000);
}
