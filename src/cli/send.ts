import { randomUUID } from 'node:crypto';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { z } from 'zod';
import { MODES } from '../access/tokens.ts';
import { createToken, readTokenFile, revokeToken } from '../ingress/tokens.ts';
import { ingressTokensFile, instanceDir } from '../local/instance.ts';
import type { KubeRefHolt } from './kube.ts';
import { CliError, EXIT } from './output.ts';
import { resolveInstance } from './resolve.ts';

// A message (or a wake) for a living agent through its ingress, as any client sends one, without
// printing: `holt send|wake` print what became of it, `holt mcp`'s send_message returns it.

/** What the ingress did with it: queued, or a duplicate of an earlier key. */
export interface Queued {
  status: string;
  id: string;
}

/**
 * The CLI's own operator token for a role on a local instance, made on first use and kept (0600) in the
 * instance's directory beside the admin URLs it already keeps there.
 */
function cliToken(instance: string, role: string): string {
  const file = join(instanceDir(instance), 'cli-tokens.json');
  const kept = existsSync(file)
    ? z
        .record(z.string(), z.string())
        .catch({})
        .parse(JSON.parse(readFileSync(file, 'utf8')))
    : {};
  const have = kept[role];
  const listed = readTokenFile(ingressTokensFile(instance)).tokens.some(
    (t) => t.role === role && t.name === 'cli-operator',
  );
  if (have && listed) return have;
  if (listed) revokeToken(ingressTokensFile(instance), role, 'cli-operator');
  const { token } = createToken(ingressTokensFile(instance), {
    name: 'cli-operator',
    role,
    modes: [...MODES],
    origin: 'operator',
    ratePerMinute: 600,
  });
  writeFileSync(file, `${JSON.stringify({ ...kept, [role]: token }, null, 2)}\n`, { mode: 0o600 });
  return token;
}

const Reply = z.object({
  status: z.string().optional(),
  id: z.string().optional(),
  error: z.string().optional(),
});

/** POSTs to the ingress at `url` as any client would; the reply's error becomes the CLI's. */
export async function postIngress(
  url: string,
  mode: 'messages' | 'wake',
  role: string,
  text: string | undefined,
  token: string,
  key: string = randomUUID(),
): Promise<Queued> {
  let r: Response;
  try {
    r = await fetch(`${url}/v1/agents/${encodeURIComponent(role)}/${mode}`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${token}`,
        'idempotency-key': key,
        'content-type': 'application/json',
      },
      body: JSON.stringify(mode === 'messages' ? { text } : {}),
      signal: AbortSignal.timeout(15_000),
    });
  } catch (e) {
    throw new CliError(`cannot reach the ingress at ${url}: ${(e as Error).message}`, EXIT.error);
  }
  const reply = Reply.safeParse(await r.json().catch(() => ({})));
  const said = reply.success ? reply.data : {};
  if (!r.ok)
    throw new CliError(
      `the ingress answered ${r.status}: ${said.error ?? r.statusText}`,
      r.status === 404 ? EXIT.notFound : EXIT.error,
    );
  return { status: said.status ?? 'queued', id: said.id ?? '' };
}

/** To a local instance's ingress, with --token, HOLT_TOKEN or the CLI's own operator token. */
export async function queueLocal(
  mode: 'messages' | 'wake',
  role: string,
  text: string | undefined,
  o: { name?: string; token?: string; key?: string },
): Promise<Queued> {
  const s = resolveInstance(o.name);
  if (!s.ingressUrl)
    throw new CliError(
      `instance '${s.name}' has no ingress: no agent of it lives (give one llm.life: true)`,
      EXIT.notFound,
    );
  const token = o.token ?? process.env.HOLT_TOKEN ?? cliToken(s.name, role);
  return postIngress(s.ingressUrl, mode, role, text, token, o.key);
}

/**
 * To a Holt in a cluster: through the orchestrator's ingress port, port-forwarded by the API server,
 * with a token of the agent (the ones its Agent's spec.ingress names): --token, else its first
 * operator token, read from its Secret with the user's rights.
 */
export async function queueKube(
  k: KubeRefHolt,
  mode: 'messages' | 'wake',
  role: string,
  text: string | undefined,
  o: { token?: string; key?: string },
): Promise<Queued> {
  const token =
    o.token ??
    process.env.HOLT_TOKEN ??
    (await (
      await import('./commands/cluster-tokens.ts')
    ).operatorToken(k, role, mode === 'messages' ? 'enqueue_message' : 'wake_hint'));
  const { componentPods, forward } = await import('./kube.ts');
  const { INGRESS_PORT } = await import('../operator/specs/pod.ts');
  const pod = (await componentPods(k.kc, k.namespace, k.name, 'orchestrator')).find(
    (p) => p.metadata?.name && !p.metadata.deletionTimestamp && p.status?.phase === 'Running',
  );
  if (!pod) throw new CliError(`no running orchestrator in Holt ${k.namespace}/${k.name}`, EXIT.notFound);
  const fwd = await forward(k.kc, k.namespace, pod.metadata!.name!, INGRESS_PORT);
  try {
    return await postIngress(`http://127.0.0.1:${fwd.port}`, mode, role, text, token, o.key);
  } finally {
    await new Promise<void>((resolve) => fwd.server.close(() => resolve()));
  }
}
