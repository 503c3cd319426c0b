import { createHash } from 'node:crypto';
import type { V1EnvVar } from '@kubernetes/client-node';
import { type ToolUser, toolPermissions, toolUserName, toolUsers } from '../../access/nats.ts';
import type { AgentResourceSpec } from '../../api/agent.ts';
import type { KubeObject } from '../kube/kube.ts';
import { childName, labels, meta, type Owner } from './meta.ts';
import { STORE_PORTS, storeName } from './stores.ts';

/**
 * Per-tool credentials on a Holt's bundled NATS: each asynchronous NATS tool its Agents declare
 * (`llm.tools[].async: nats`) gets a NATS user `tool-<name>` that hears only that tool's requests of the
 * Holt's instance (toolPermissions) and may only answer them, and a Secret a tool service mounts.
 * The password is derived from the NATS Secret's `tool` password as the local mode derives it
 * (toolUsers: an HMAC), so nothing new is stored in the NATS Secret and knowing one gives no other.
 */

/** The component label of the per-tool Secrets (and what their labels select by). */
export const TOOL_SECRET_COMPONENT = 'tool-credentials';

/** The asynchronous NATS tools the Agents declare: sorted, each once (one user serves every Agent). */
export function natsToolNames(specs: Pick<AgentResourceSpec, 'llm'>[]): string[] {
  const names = specs.flatMap((s) =>
    (s.llm?.tools ?? []).filter((t) => t.async === 'nats').map((t) => t.name),
  );
  return [...new Set(names)].sort();
}

/**
 * The Secret of one tool's credentials, `<holt>-tool-<name>`. A name that is not already a DNS label
 * (capitals, `_`) gets a hash of itself, so `a_b` and `a-b` never share a Secret.
 */
export function toolSecretName(holt: string, tool: string): string {
  if (/^[a-z0-9]([a-z0-9-]*[a-z0-9])?$/.test(tool)) return childName(holt, 'tool', tool);
  const h = createHash('sha256').update(tool).digest('hex').slice(0, 8);
  return childName(holt, 'tool', tool, h);
}

/** The env variable the bundled NATS's start script reads the i-th tool user's password from. */
export const toolPasswordVar = (i: number) => `HOLT_TOOL_${i}_PASSWORD`;

/** The bundled NATS's env for its per-tool users: each password from that tool's Secret. */
export function natsToolEnv(holt: string, tools: string[]): V1EnvVar[] {
  return tools.map((t, i) => ({
    name: toolPasswordVar(i),
    valueFrom: { secretKeyRef: { name: toolSecretName(holt, t), key: 'password' } },
  }));
}

/** The per-tool users as the start script writes them (passwords expanded from natsToolEnv). */
export function natsToolUsers(tools: string[]): ToolUser[] {
  return tools.map((t, i) => ({ user: toolUserName(t), password: `$${toolPasswordVar(i)}`, tools: [t] }));
}

/** The tools whose users a bundled NATS StatefulSet (as applied) has: its env names their Secrets. */
export function toolSecretsOf(sts: KubeObject | undefined): string[] {
  const containers =
    (sts?.spec as { template?: { spec?: { containers?: { env?: V1EnvVar[] }[] } } } | undefined)?.template
      ?.spec?.containers ?? [];
  return containers.flatMap((c) =>
    (c.env ?? []).flatMap((e) =>
      /^HOLT_TOOL_\d+_PASSWORD$/.test(e.name) && e.valueFrom?.secretKeyRef?.name
        ? [e.valueFrom.secretKeyRef.name]
        : [],
    ),
  );
}

/**
 * One tool service's Secret: `user`, `password`, `url` (the bundled NATS, as the `tool-url` key of
 * the NATS Secret), `instance` (the subject token its requests carry: HOLT_INSTANCE of
 * examples/living/tool-service.mjs) and `subject`. Derived from `secret` (the `tool` password), so applying it again
 * changes nothing.
 */
export function toolSecret(owner: Owner, tool: string, secret: string, tls: boolean): KubeObject {
  const holt = owner.name;
  const [u] = toolUsers(secret, [tool]);
  if (!u) throw new Error(`no user for tool ${tool}`);
  const host = `${storeName(holt, 'nats')}.${owner.namespace}.svc`;
  const [subject] = toolPermissions(holt, [tool]).subscribe;
  return {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: meta(
      toolSecretName(holt, tool),
      owner,
      labels(holt, toolSecretName(holt, tool), TOOL_SECRET_COMPONENT),
    ),
    type: 'Opaque',
    stringData: {
      user: u.user,
      password: u.password,
      url: `${tls ? 'tls' : 'nats'}://${u.user}:${u.password}@${host}:${STORE_PORTS.nats}`,
      instance: subject?.split('.')[2] ?? holt,
      subject: subject ?? '',
    },
  };
}
