import { CoreV1Api, CustomObjectsApi, type V1Pod } from '@kubernetes/client-node';
import { API_VERSION } from '../../api/common.ts';
import { Blackboard } from '../../blackboard/client.ts';
import { CLAIM_STATUSES, type Claim } from '../../blackboard/types.ts';
import { INGRESS_PORT } from '../../operator/specs/pod.ts';
import { apiError, componentPods, forward, type KubeHolt, type KubeRefHolt, podLog } from '../kube.ts';
import { CliError, EXIT, out, paint, table } from '../output.ts';
import { positiveInt } from '../resolve.ts';
import { dormantLines } from './status.ts';

/** `holt --kube ns/name status`: the Holt's phase and conditions, its pods, its claims by status. */
export async function kubeStatus(k: KubeHolt, opts: { json?: boolean }): Promise<void> {
  const [group, version] = API_VERSION.split('/') as [string, string];
  type Holt = {
    status?: {
      phase?: string;
      observedGeneration?: number;
      agents?: { total?: number; ready?: number };
      conditions?: { type: string; status: string; reason?: string; message?: string }[];
    };
  };
  let holt: Holt;
  let pods: Awaited<ReturnType<CoreV1Api['listNamespacedPod']>>['items'];
  try {
    holt = (await k.kc.makeApiClient(CustomObjectsApi).getNamespacedCustomObject({
      group,
      version,
      namespace: k.namespace,
      plural: 'holts',
      name: k.name,
    })) as Holt;
    pods = (
      await k.kc
        .makeApiClient(CoreV1Api)
        .listNamespacedPod({ namespace: k.namespace, labelSelector: `holt.io/instance=${k.name}` })
    ).items;
  } catch (e) {
    throw apiError(e, `Holt ${k.namespace}/${k.name}`);
  }
  const claims: Record<string, number> = {};
  const dormant: Claim[] = [];
  const bb = Blackboard.connect(k.redisUrl, k.name, { ...k.redisOptions, maxRetriesPerRequest: 1 });
  try {
    for (const c of await bb.getClaims(await bb.listClaimIds())) {
      if (c) claims[c.claim.status] = (claims[c.claim.status] ?? 0) + 1;
      if (c?.claim.dormant_reason) dormant.push(c.claim);
    }
  } finally {
    await bb.close();
  }
  const podRows = pods.map((p) => {
    const cs = p.status?.containerStatuses ?? [];
    return [
      p.metadata?.name ?? '',
      `${cs.filter((c) => c.ready).length}/${cs.length}`,
      p.metadata?.deletionTimestamp ? 'Terminating' : (p.status?.phase ?? ''),
      String(cs.reduce((n, c) => n + c.restartCount, 0)),
      p.spec?.nodeName ?? '',
    ];
  });
  if (opts.json)
    return out(
      JSON.stringify(
        {
          namespace: k.namespace,
          name: k.name,
          status: holt.status ?? {},
          pods: podRows,
          claims,
          dormant: dormant.map((c) => ({
            claim_id: c.id,
            reason: c.dormant_reason,
            silent_agents: c.silent_agents ?? [],
          })),
        },
        null,
        2,
      ),
    );
  const phase = holt.status?.phase ?? 'Unknown';
  const colour = phase === 'Ready' ? 'green' : phase === 'Degraded' ? 'red' : 'yellow';
  out(
    `Holt ${k.namespace}/${k.name}: ${paint(colour, phase)} (agents ${holt.status?.agents?.ready ?? 0}/${holt.status?.agents?.total ?? 0} ready)`,
  );
  for (const c of holt.status?.conditions ?? [])
    if (c.status !== 'True' || c.type === 'Ready')
      out(`  ${c.type}=${c.status} ${c.reason ?? ''}: ${c.message ?? ''}`);
  if (!holt.status?.observedGeneration) {
    const { findOperators, noStatusHint } = await import('../unwatched.ts');
    out(`  ${paint('yellow', noStatusHint(k.namespace, k.name, await findOperators(k.kc)))}`);
  }
  out('');
  for (const l of table([['POD', 'READY', 'STATUS', 'RESTARTS', 'NODE'], ...podRows])) out(l);
  out('');
  out(`Claims: ${CLAIM_STATUSES.map((s) => `${s}=${claims[s] ?? 0}`).join('  ')}`);
  for (const l of dormantLines(dormant)) out(l);
}

/** `holt --kube ns/name logs <role|orchestrator>`: the pods' logs through the API server. */
export async function kubeLogs(
  k: KubeRefHolt,
  component: string,
  opts: { follow?: boolean; lines: string },
): Promise<void> {
  const tailLines = positiveInt('--lines', opts.lines);
  const pods = (await componentPods(k.kc, k.namespace, k.name, component)).filter((p) => p.metadata?.name);
  if (!pods.length)
    throw new CliError(
      `no pods of '${component}' in Holt ${k.namespace}/${k.name} (an agent's role, or orchestrator)`,
      EXIT.notFound,
    );
  const container = component === 'orchestrator' ? 'orchestrator' : 'pup';
  // A pod whose container has not started (a worker being scheduled, an image pulling) has no log yet:
  // it is named with its reason rather than failing the others.
  const waiting = (p: V1Pod): string | undefined => {
    const cs = p.status?.containerStatuses?.find((c) => c.name === container);
    if (cs?.state?.running || cs?.state?.terminated || cs?.lastState?.terminated) return undefined;
    return cs?.state?.waiting?.reason ?? p.status?.phase ?? 'Pending';
  };
  const started = pods.filter((p) => !waiting(p));
  if (!started.length)
    throw new CliError(
      `no pod of '${component}' has started yet (${pods.map((p) => `${p.metadata!.name}: ${waiting(p)}`).join(', ')})`,
      EXIT.error,
    );
  // Following: the first pod that has a log (kubectl logs deploy/... does the same); else each in turn.
  const shown = opts.follow ? started.slice(0, 1) : pods;
  for (const p of shown) {
    const why = waiting(p);
    if (shown.length > 1) out(`==> ${p.metadata!.name} <==${why ? ` (not started: ${why})` : ''}`);
    if (why) continue;
    await podLog(k.kc, k.namespace, p.metadata!.name!, container, {
      follow: Boolean(opts.follow),
      tailLines,
    });
  }
}

/**
 * `holt --kube ns/name send|wake ROLE`: through the orchestrator's ingress port, port-forwarded by the
 * API server, with a token of the agent (the ones its Agent's spec.ingress names): --token, else its
 * first operator token, read from its Secret with the user's rights.
 */
export async function kubeSend(
  k: KubeRefHolt,
  mode: 'messages' | 'wake',
  role: string,
  text: string | undefined,
  o: { token?: string; key?: string },
): Promise<void> {
  const token =
    o.token ??
    process.env.HOLT_TOKEN ??
    (await (
      await import('./cluster-tokens.ts')
    ).operatorToken(k, role, mode === 'messages' ? 'enqueue_message' : 'wake_hint'));
  const pod = (await componentPods(k.kc, k.namespace, k.name, 'orchestrator')).find(
    (p) => p.metadata?.name && !p.metadata.deletionTimestamp && p.status?.phase === 'Running',
  );
  if (!pod) throw new CliError(`no running orchestrator in Holt ${k.namespace}/${k.name}`, EXIT.notFound);
  const fwd = await forward(k.kc, k.namespace, pod.metadata!.name!, INGRESS_PORT);
  try {
    const { sendThrough } = await import('./ingress.ts');
    await sendThrough(`http://127.0.0.1:${fwd.port}`, mode, role, text, token, o.key);
  } finally {
    await new Promise<void>((resolve) => fwd.server.close(() => resolve()));
  }
}
