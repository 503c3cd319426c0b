import { CustomObjectsApi } from '@kubernetes/client-node';
import { API_VERSION } from '../../api/common.ts';
import { parseAgent } from '../../operator/controllers/resources.ts';
import type { KubeObject } from '../../operator/kube/kube.ts';
import { type AgentToken, agentTokens } from '../../operator/specs/ingress.ts';
import { apiError, type KubeRefHolt } from '../kube.ts';
import { CliError, EXIT, out, table } from '../output.ts';

/**
 * `holt --kube ns/name token ...`: on a cluster an agent's ingress tokens are its Agent's
 * spec.ingress.tokens, each kept in a Secret (the operator's `<agent>-ingress-<name>`, or the user's
 * own). The CLI reads the Agents and those Secrets with the user's own rights, as kubectl would; it
 * makes and revokes none (that is an edit of the Agent, or deleting its Secret).
 */

/** The tokens of the Holt's Agents (one role's with `role`), as the operator derives them. */
export async function kubeTokens(h: KubeRefHolt, role?: string): Promise<AgentToken[]> {
  const [group, version] = API_VERSION.split('/') as [string, string];
  let items: KubeObject[];
  try {
    const list = (await h.kc.makeApiClient(CustomObjectsApi).listNamespacedCustomObject({
      group,
      version,
      namespace: h.namespace,
      plural: 'agents',
    })) as { items: KubeObject[] };
    items = list.items;
  } catch (e) {
    throw apiError(e, `the Agents of ${h.namespace}`);
  }
  const roles: string[] = [];
  const tokens: AgentToken[] = [];
  for (const a of items) {
    const p = parseAgent(a);
    if (!p.ok || p.spec.holt !== h.name) continue;
    roles.push(p.spec.role);
    if (!role || p.spec.role === role) tokens.push(...agentTokens(a.metadata.name, p.spec.role, p.spec));
  }
  if (role && !roles.includes(role))
    throw new CliError(
      `Holt ${h.namespace}/${h.name} has no agent ${role} (agents: ${roles.sort().join(', ') || 'none'})`,
      EXIT.notFound,
    );
  return tokens.sort((a, b) => `${a.role}/${a.name}`.localeCompare(`${b.role}/${b.name}`));
}

/** `token list [ROLE]`: names, agents, scopes and Secrets; never the tokens. */
export async function kubeTokenList(
  h: KubeRefHolt,
  role: string | undefined,
  o: { json?: boolean },
): Promise<void> {
  const tokens = await kubeTokens(h, role);
  if (o.json) return out(JSON.stringify(tokens, null, 2));
  if (!tokens.length)
    return out(
      `No tokens${role ? ` for ${role}` : ''}: an Agent's spec.ingress (enabled: true, tokens: [...]) declares them.`,
    );
  for (const l of table([
    ['NAME', 'AGENT', 'ROLE', 'MODES', 'ORIGIN', 'RATE/MIN', 'MAX PRIORITY', 'SECRET'],
    ...tokens.map((t) => [
      t.name,
      t.agent,
      t.role,
      t.modes.join(','),
      t.origin,
      String(t.ratePerMinute),
      String(t.maxPriority),
      t.secretName,
    ]),
  ]))
    out(l);
}

/** `token show ROLE NAME`: the token itself, from its Secret (the user's right to read it decides). */
export async function kubeTokenShow(h: KubeRefHolt, role: string, name: string): Promise<void> {
  const t = (await kubeTokens(h, role)).find((x) => x.name === name);
  if (!t)
    throw new CliError(
      `agent ${role} of Holt ${h.namespace}/${h.name} has no token ${name}: see \`holt --kube ${h.namespace}/${h.name} token list ${role}\``,
      EXIT.notFound,
    );
  out(await h.secretValue(t.secretName, 'token'));
}

/**
 * The token `send`/`wake`/`life tasks|cancel` use on a cluster when none is given: the role's first
 * token of origin operator that allows the mode, if one is asked (an operator's instruction, as the
 * local CLI's own token is).
 */
export async function operatorToken(
  h: KubeRefHolt,
  role: string,
  mode: 'enqueue_message' | 'wake_hint' | undefined,
): Promise<string> {
  const t = (await kubeTokens(h, role)).find(
    (x) => x.origin === 'operator' && (mode === undefined || x.modes.includes(mode)),
  );
  if (!t)
    throw new CliError(
      `agent ${role} has no token of origin operator${mode ? ` allowing ${mode}` : ''}: add one to its Agent's spec.ingress.tokens, or pass --token (env HOLT_TOKEN)`,
      EXIT.usage,
    );
  return h.secretValue(t.secretName, 'token');
}

/** `token create|revoke` on a cluster: the Agent's spec is where tokens are made and revoked. */
export function kubeTokenChange(h: KubeRefHolt, verb: 'create' | 'revoke'): never {
  throw new CliError(
    verb === 'create'
      ? `--kube: on a cluster an agent's tokens are its Agent's spec.ingress.tokens (the operator makes each Secret): add one with \`kubectl edit agent -n ${h.namespace}\`, then \`holt --kube ${h.namespace}/${h.name} token show ROLE NAME\``
      : `--kube: on a cluster a token is revoked by deleting its Secret (the operator makes a new one) or removing it from its Agent's spec.ingress.tokens: see \`holt --kube ${h.namespace}/${h.name} token list\``,
    EXIT.usage,
  );
}
