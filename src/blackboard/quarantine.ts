import type { Blackboard } from './client.ts';
import { Quarantined } from './types.ts';

/** Items set aside (extension hash `quarantine`): malformed or unauthorised, recorded once, never acted on. */

const safeJson = (s: string): unknown => {
  try {
    return JSON.parse(s);
  } catch {
    return undefined;
  }
};

/** Sets an item aside; true when it is new (report it then, once), false when already there. */
export async function quarantineItem(bb: Blackboard, q: Omit<Quarantined, 'at_ms'>): Promise<boolean> {
  const entry: Quarantined = { ...q, at_ms: Date.now() };
  return (await bb.redis.hsetnx(bb.k.quarantine, `${q.kind}:${q.id}`, JSON.stringify(entry))) === 1;
}

/**
 * Sets a claim aside and takes it out of the active and dormant sets in one transaction (nothing
 * reads it again); true when it is new.
 */
export async function quarantineClaim(bb: Blackboard, q: Omit<Quarantined, 'at_ms'>): Promise<boolean> {
  const entry: Quarantined = { ...q, at_ms: Date.now() };
  const res = await bb.redis
    .multi()
    .hsetnx(bb.k.quarantine, `claim:${q.id}`, JSON.stringify(entry))
    .srem(bb.k.activeClaims, q.id)
    .srem(bb.k.dormantClaims, q.id)
    .exec();
  const [err, fresh] = res?.[0] ?? [new Error('transaction discarded'), 0];
  if (err) throw err;
  return fresh === 1;
}

/** Everything set aside, oldest first; an unreadable entry is listed as such, never thrown. */
export async function readQuarantine(bb: Blackboard): Promise<Quarantined[]> {
  const all = await bb.redis.hgetall(bb.k.quarantine);
  return Object.entries(all)
    .map(([field, v]) => {
      const r = Quarantined.safeParse(safeJson(v));
      if (r.success) return r.data;
      const [kind = 'unknown', ...id] = field.split(':');
      return { kind, id: id.join(':'), reason: 'unreadable quarantine entry', at_ms: 0 };
    })
    .sort((a, b) => a.at_ms - b.at_ms);
}
