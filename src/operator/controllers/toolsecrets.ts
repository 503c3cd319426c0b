import type { HoltSpec } from '../../api/holt.ts';
import { isConflict, type KubeObject } from '../kube/kube.ts';
import type { Owner } from '../specs/meta.ts';
import { passwordKey, storeName, storeSecretName, storesTls } from '../specs/stores.ts';
import { natsToolNames, toolSecret, toolSecretName, toolSecretsOf } from '../specs/tool-secrets.ts';
import type { ControllerContext } from './context.ts';
import { holtOf, parseAgent } from './resources.ts';

/** The asynchronous NATS tools the Holt's Agents declare (from the cache; an invalid Agent declares none). */
export function holtNatsTools(ctx: ControllerContext, namespace: string, holt: string): string[] {
  return natsToolNames(
    ctx.cache
      .list('Agent', namespace)
      .filter((a) => holtOf(a) === holt && !a.metadata.deletionTimestamp)
      .flatMap((a) => {
        const p = parseAgent(a);
        return p.ok ? [p.spec] : [];
      }),
  );
}

const dataOf = (s: KubeObject | undefined): Record<string, string> =>
  Object.fromEntries(
    Object.entries((s as { data?: Record<string, string> } | undefined)?.data ?? {}).map(([k, v]) => [
      k,
      Buffer.from(v, 'base64').toString('utf8'),
    ]),
  );

/**
 * The tool Secrets this operator process handed out per Holt (by uid) and has not pruned yet. The
 * cached NATS StatefulSet alone can miss one: a cache that has not yet seen the StatefulSet that added
 * a tool, or a pass that applied the StatefulSet without the tool but skipped the prune (another child
 * failed), and the next pass no longer sees the tool in it. Per operator context (a test runs several).
 */
const handedOut = new WeakMap<ControllerContext, Map<string, Set<string>>>();
function ledger(ctx: ControllerContext, uid: string): Set<string> {
  const byHolt = handedOut.get(ctx) ?? new Map<string, Set<string>>();
  handedOut.set(ctx, byHolt);
  const names = byHolt.get(uid) ?? new Set<string>();
  byHolt.set(uid, names);
  return names;
}

/**
 * Level-triggered: a Secret per asynchronous NATS tool of a bundled NATS, derived from the NATS
 * Secret's `tool` password (made when missing, patched when it differs). Returns the tools whose
 * users the bundled NATS is to have, and the tool Secrets its live StatefulSet reads now or this
 * process handed out (`had`, for pruneToolSecrets once the new one is applied). Throws when the NATS Secret has no `tool` password.
 */
export async function syncToolSecrets(
  ctx: ControllerContext,
  owner: Owner,
  spec: HoltSpec,
  tools: string[],
): Promise<{ created: string[]; had: string[] }> {
  const ns = owner.namespace;
  const handed = ledger(ctx, owner.uid);
  const had = [
    ...new Set([
      ...toolSecretsOf(ctx.cache.get('StatefulSet', ns, storeName(owner.name, 'nats'))),
      ...handed,
    ]),
  ].sort();
  const created: string[] = [];
  if (spec.stores.nats.mode !== 'bundled' || !tools.length) return { created, had };
  const nats = await ctx.client.get('Secret', ns, storeSecretName(owner.name, 'nats'));
  const secret = dataOf(nats)[passwordKey('tool')];
  if (!secret) throw new Error(`Secret ${storeSecretName(owner.name, 'nats')} has no tool password yet`);
  const tls = storesTls(spec.stores) !== undefined;
  for (const t of tools) {
    const want = toolSecret(owner, t, secret, tls);
    const wantData = want.stringData as Record<string, string>;
    handed.add(want.metadata.name);
    const live = await ctx.client.get('Secret', ns, want.metadata.name);
    if (!live) {
      try {
        await ctx.client.create(want);
        created.push(`Secret/${want.metadata.name}`);
      } catch (e) {
        // 409: made by an earlier pass our read missed; the next pass checks its content.
        if (!isConflict(e)) throw e;
      }
      continue;
    }
    if (!live.metadata.ownerReferences?.some((r) => r.uid === owner.uid))
      throw new Error(`Secret ${want.metadata.name} exists and is not this Holt's: rename or delete it`);
    const have = dataOf(live);
    if (Object.entries(wantData).some(([k, v]) => have[k] !== v))
      await ctx.client.mergePatch('Secret', ns, want.metadata.name, { stringData: wantData });
  }
  return { created, had };
}

/**
 * Deletes the tool Secrets the NATS StatefulSet read before or this process handed out (`had`) that no
 * tool wants now, once the new StatefulSet is applied (a running container keeps the env it started
 * with). Secrets are never listed: a Secret missed here (the operator restarted in between, with a
 * tool dropped meanwhile) only holds a password NATS no longer accepts.
 */
export async function pruneToolSecrets(
  ctx: ControllerContext,
  owner: Owner,
  had: string[],
  tools: string[],
): Promise<string[]> {
  const keep = new Set(tools.map((t) => toolSecretName(owner.name, t)));
  const deleted: string[] = [];
  // Not read first: the guard lets the operator read only Secrets an Agent names, and no Agent names
  // a dropped tool's. The names come from the StatefulSet the operator wrote.
  for (const name of had.filter((n) => !keep.has(n))) {
    await ctx.client.delete('Secret', owner.namespace, name); // one already gone is success
    ledger(ctx, owner.uid).delete(name);
    deleted.push(`Secret/${name}`);
  }
  return deleted;
}
