import { randomUUID } from 'node:crypto';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { z } from 'zod';
import { MODES, type Mode } from '../access/tokens.ts';
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

/**
 * A request to the ingress at `url` as any client sends one, with a timeout; a refusal becomes the
 * CLI's error (its status's exit code), an answer the JSON it carried.
 */
export async function ingressRequest(
  url: string,
  method: 'GET' | 'POST' | 'DELETE',
  path: string,
  token: string,
  o: { body?: unknown; key?: string } = {},
): Promise<unknown> {
  let r: Response;
  try {
    r = await fetch(`${url}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${token}`,
        ...(o.key ? { 'idempotency-key': o.key } : {}),
        ...(o.body !== undefined ? { 'content-type': 'application/json' } : {}),
      },
      ...(o.body !== undefined ? { body: JSON.stringify(o.body) } : {}),
      signal: AbortSignal.timeout(15_000),
    });
  } catch (e) {
    throw new CliError(`cannot reach the ingress at ${url}: ${(e as Error).message}`, EXIT.error);
  }
  const json: unknown = await r.json().catch(() => ({}));
  if (!r.ok) {
    const said = Reply.safeParse(json);
    throw new CliError(
      `the ingress answered ${r.status}: ${(said.success && said.data.error) || r.statusText}`,
      r.status === 404 ? EXIT.notFound : r.status === 409 || r.status === 400 ? EXIT.usage : EXIT.error,
    );
  }
  return json;
}

/** POSTs a message (or a wake) to the ingress at `url`. */
export async function postIngress(
  url: string,
  mode: 'messages' | 'wake',
  role: string,
  text: string | undefined,
  token: string,
  key: string = randomUUID(),
): Promise<Queued> {
  const json = await ingressRequest(url, 'POST', `/v1/agents/${encodeURIComponent(role)}/${mode}`, token, {
    body: mode === 'messages' ? { text } : {},
    key,
  });
  const said = Reply.safeParse(json);
  return { status: (said.success && said.data.status) || 'queued', id: (said.success && said.data.id) || '' };
}

/**
 * Runs `fn` with the ingress of `role`'s agent and an operator token for it: a local instance's (with
 * --token, HOLT_TOKEN or the CLI's own operator token), or with `k` a Holt's in a cluster, through its
 * orchestrator's ingress port port-forwarded by the API server (--token, HOLT_TOKEN, or the agent's
 * first operator token allowing `mode`, read from its Secret with the user's rights).
 */
export async function atIngress<T>(
  k: KubeRefHolt | undefined,
  role: string,
  o: { name?: string; token?: string },
  mode: Mode | undefined,
  fn: (url: string, token: string) => Promise<T>,
): Promise<T> {
  if (!k) {
    const s = resolveInstance(o.name);
    if (!s.ingressUrl)
      throw new CliError(
        `instance '${s.name}' has no ingress: no agent of it lives (give one llm.life: true)`,
        EXIT.notFound,
      );
    return fn(s.ingressUrl, o.token ?? process.env.HOLT_TOKEN ?? cliToken(s.name, role));
  }
  const token =
    o.token ??
    process.env.HOLT_TOKEN ??
    (await (await import('./commands/cluster-tokens.ts')).operatorToken(k, role, mode));
  const { componentPods, forward } = await import('./kube.ts');
  const { INGRESS_PORT } = await import('../operator/specs/pod.ts');
  const pod = (await componentPods(k.kc, k.namespace, k.name, 'orchestrator')).find(
    (p) => p.metadata?.name && !p.metadata.deletionTimestamp && p.status?.phase === 'Running',
  );
  if (!pod) throw new CliError(`no running orchestrator in Holt ${k.namespace}/${k.name}`, EXIT.notFound);
  const fwd = await forward(k.kc, k.namespace, pod.metadata!.name!, INGRESS_PORT);
  try {
    return await fn(`http://127.0.0.1:${fwd.port}`, token);
  } finally {
    await new Promise<void>((resolve) => fwd.server.close(() => resolve()));
  }
}

/** To a local instance's ingress. */
export const queueLocal = (
  mode: 'messages' | 'wake',
  role: string,
  text: string | undefined,
  o: { name?: string; token?: string; key?: string },
): Promise<Queued> =>
  atIngress(undefined, role, o, undefined, (url, token) => postIngress(url, mode, role, text, token, o.key));

/** To a Holt in a cluster, through the orchestrator's ingress port. */
export const queueKube = (
  k: KubeRefHolt,
  mode: 'messages' | 'wake',
  role: string,
  text: string | undefined,
  o: { token?: string; key?: string },
): Promise<Queued> =>
  atIngress(k, role, o, mode === 'messages' ? 'enqueue_message' : 'wake_hint', (url, token) =>
    postIngress(url, mode, role, text, token, o.key),
  );
