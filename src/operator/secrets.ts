import { parseAgent, parseHolt } from './controllers/resources.ts';
import type { Cache } from './kube/cache.ts';
import type { KubeObject } from './kube/kube.ts';
import { agentTokens, consoleTokens, ingressTokensSecretName } from './specs/ingress.ts';
import { STORES, storeSecretName } from './specs/stores.ts';
import { natsToolNames, toolSecretName } from './specs/tool-secrets.ts';

/**
 * Which Secrets the operator may read. RBAC cannot say it (a Role names resources, not the names a
 * custom resource holds), so `get secrets` covers every Secret of a watched namespace; the operator
 * itself reads only those its Holts and Agents name, and those it makes for them. Every Secret read
 * goes through KubeClient.get, which asks this guard first (installed by the Operator).
 */

/** A key that names a Secret: `secretName`, `tlsSecretName`, `…SecretRef`, `secretKeyRef`. */
const NAME_KEY = /secretname$/i;
const REF_KEY = /secret(key)?ref$/i;

/** The Secret names anywhere in a spec, under the keys above (new fields are covered as they come). */
export function secretNamesIn(spec: unknown, out = new Set<string>()): Set<string> {
  if (Array.isArray(spec)) for (const v of spec) secretNamesIn(v, out);
  else if (spec && typeof spec === 'object')
    for (const [k, v] of Object.entries(spec)) {
      if (NAME_KEY.test(k) && typeof v === 'string' && v) out.add(v);
      else if (
        REF_KEY.test(k) &&
        v &&
        typeof v === 'object' &&
        typeof (v as { name?: unknown }).name === 'string'
      )
        out.add((v as { name: string }).name);
      else secretNamesIn(v, out);
    }
  return out;
}

/** Every Secret the Holts and Agents of one namespace name, or the operator makes for them. */
export function namedSecrets(holts: KubeObject[], agents: KubeObject[]): Set<string> {
  const out = new Set<string>();
  for (const h of holts) {
    secretNamesIn(h.spec, out);
    for (const s of STORES) out.add(storeSecretName(h.metadata.name, s));
    out.add(ingressTokensSecretName(h.metadata.name));
    const p = parseHolt(h);
    if (p.ok) for (const t of consoleTokens(h.metadata.name, p.spec)) out.add(t.secretName);
  }
  for (const a of agents) {
    secretNamesIn(a.spec, out);
    const p = parseAgent(a);
    if (p.ok) for (const t of agentTokens(a.metadata.name, p.spec.role, p.spec)) out.add(t.secretName);
    // The per-tool NATS credentials made for its asynchronous tools (tool-secrets.ts).
    if (p.ok) for (const t of natsToolNames([p.spec])) out.add(toolSecretName(p.spec.holt, t));
  }
  return out;
}

/** Why reading Secret `namespace/name` is refused, or undefined when a Holt or Agent there names it. */
export function secretRefusal(cache: Cache, namespace: string | undefined, name: string): string | undefined {
  if (!namespace) return 'a Secret is read in its namespace only';
  const named = namedSecrets(cache.list('Holt', namespace), cache.list('Agent', namespace));
  return named.has(name) ? undefined : `no Holt or Agent in ${namespace} names Secret ${name}`;
}
