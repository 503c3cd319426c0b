import type { V1Pod } from '@kubernetes/client-node';
import { CLAIM_STATUSES } from '../../blackboard/types.ts';
import { componentPods, type KubeHolt, type KubeRefHolt, podLog } from '../kube.ts';
import { CliError, EXIT, out, paint, table } from '../output.ts';
import { positiveInt } from '../resolve.ts';
import { kubeStatusJson, kubeStatusReport } from '../status-report.ts';
import { dormantLines, mcpServerLines } from './status.ts';

/** `holt --kube ns/name status`: the Holt's phase and conditions, its pods, its claims by status. */
export async function kubeStatus(k: KubeHolt, opts: { json?: boolean }): Promise<void> {
  const r = await kubeStatusReport(k);
  if (opts.json) return out(JSON.stringify(kubeStatusJson(k, r), null, 2));
  const { holt, pods: podRows, claims, dormant, mcp } = r;
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
  const m = mcpServerLines(mcp);
  if (m.length) out('');
  for (const l of m) out(l);
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
