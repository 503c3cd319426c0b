import { BlackboardDataError, hashToArtefact, hashToClaim } from './codec.ts';
import type { Artefact, Claim } from './types.ts';

/** How stored hashes and script replies become typed values, shared by the blackboard's modules. */

export interface VersionedClaim {
  claim: Claim;
  /** Compare-and-set revision (our extension field `rev`; Holt ignores it). */
  rev: number;
}

/** Where reads report an item they skipped because it does not parse (see `Blackboard`). */
export type MalformedSink = (e: BlackboardDataError) => void;

/** `parse()`, or null after reporting a malformed item to `sink`; other errors are thrown. */
export function lenient<T>(sink: MalformedSink, parse: () => T): T | null {
  try {
    return parse();
  } catch (e) {
    if (!(e instanceof BlackboardDataError)) throw e;
    sink(e);
    return null;
  }
}

/** A stored claim hash, or null (reported) when malformed. */
export function claimOf(sink: MalformedSink, id: string, h: Record<string, string>): VersionedClaim | null {
  return lenient(sink, () => ({ claim: hashToClaim(id, h), rev: Number(h.rev ?? 0) }));
}

/** A stored artefact hash, or null (reported) when malformed. */
export function artefactOf(sink: MalformedSink, id: string, h: Record<string, string>): Artefact | null {
  return lenient(sink, () => hashToArtefact(id, h));
}

/**
 * The artefacts of a script reply's id, flat hash, id, flat hash, ... run from `from` on (gone ones
 * skipped, malformed ones reported and skipped: one bad child must not stop its claim).
 */
export function childrenFrom(sink: MalformedSink, reply: unknown[], from: number): Map<string, Artefact> {
  const children = new Map<string, Artefact>();
  for (let i = from; i + 1 < reply.length; i += 2) {
    const cid = reply[i] as string;
    const ch = toHash(reply[i + 1]);
    const a = Object.keys(ch).length ? artefactOf(sink, cid, ch) : null;
    if (a) children.set(cid, a);
  }
  return children;
}

/** A flat HGETALL-style reply (field, value, ...) as a hash. */
export function toHash(flatHash: unknown): Record<string, string> {
  const h: Record<string, string> = {};
  const a = (flatHash ?? []) as string[];
  for (let j = 0; j + 1 < a.length; j += 2) h[a[j] as string] = a[j + 1] as string;
  return h;
}

/** A hash as HSET's flat field, value, ... arguments. */
export function flat(h: Record<string, string>): string[] {
  const out: string[] = [];
  for (const k in h) out.push(k, h[k] as string);
  return out;
}
