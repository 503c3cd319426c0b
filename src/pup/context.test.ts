import { describe, expect, it } from 'vitest';
import { contextLevel } from '../blackboard/pup-reads.ts';
import { useBlackboard } from '../blackboard/testkit.ts';
import type { Artefact } from '../blackboard/types.ts';
import { assembleContext } from './context.ts';
import { artefact } from './testkit.ts';

const { bb } = useBlackboard('ctx');

async function commandCalls(): Promise<Record<string, number>> {
  const info = await bb().redis.info('commandstats');
  const out: Record<string, number> = {};
  for (const m of info.matchAll(/^cmdstat_(\w+):calls=(\d+)/gm)) out[m[1] as string] = Number(m[2]);
  return out;
}

describe('context assembly', () => {
  it('walks a 12-deep graph with a cycle: 10 levels, latest versions, dedupe, kept types, oldest first, one round trip per level', async () => {
    // L[1] .. L[12]: L[i] sources L[i+1]; older the deeper (created first).
    const L: Artefact[] = [];
    for (let i = 12; i >= 1; i--) L[i] = artefact({ type: `Level${i}` });
    for (let i = 1; i < 12; i++)
      L[i] = { ...(L[i] as Artefact), source_artefacts: [(L[i + 1] as Artefact).id] };
    // a malformed cycle: L5 also points back at L1
    L[5] = { ...(L[5] as Artefact), source_artefacts: [(L[6] as Artefact).id, (L[1] as Artefact).id] };
    // L6 is a Question: not kept, but the walk goes through it
    L[6] = { ...(L[6] as Artefact), structural_type: 'Question' };
    const stored = [...L.slice(1)].reverse() as Artefact[];
    // a rework of L3 (v2, newest of all), with a review: the context must carry v2, never v1
    const review = artefact({
      structural_type: 'Review',
      type: 'Review',
      payload: '{"x":1}',
      source_artefacts: [L[3]!.id],
    });
    const l3v2 = artefact({
      logical_id: L[3]!.logical_id,
      version: 2,
      type: 'Level3',
      source_artefacts: [L[3]!.id, review.id, L[4]!.id],
    });
    // a second id in L2's thread that is older than the latest: must be de-duplicated away
    const failure = artefact({ structural_type: 'Failure', type: 'ToolExecutionFailure' });
    for (const a of [...stored, review, l3v2, failure]) await bb().createArtefact(a);

    const target = artefact({ source_artefacts: [L[1]!.id, failure.id, L[1]!.id] });
    await contextLevel(bb(), [target.id]); // load the script so the count below is only the walk
    await bb().redis.config('RESETSTAT');
    let fetches = 0;
    const ctx = await assembleContext(target.source_artefacts, (ids) => {
      fetches++;
      return contextLevel(bb(), ids);
    });
    const calls = await commandCalls();

    // L3 (level 3) is replaced by its v2, whose sources bring the review and L4 (level 4)
    const ids = ctx.chain.map((a) => a.id);
    expect(ids).not.toContain(L[3]!.id);
    expect(ids).toContain(l3v2.id);
    expect(ids).toContain(review.id);
    expect(ids).not.toContain(L[6]!.id); // Question filtered out
    expect(ids).not.toContain(failure.id); // Failure filtered out
    expect(ids).toContain(L[7]!.id); // reached through the Question
    expect(new Set(ctx.chain.map((a) => a.logical_id)).size).toBe(ctx.chain.length);
    // depth: L1 is level 1, so L10 is level 10 and L11 is not reached
    expect(ids).toContain(L[10]!.id);
    expect(ids).not.toContain(L[11]!.id);
    expect(ctx.levels).toBe(10);
    // oldest first
    const times = ctx.chain.map((a) => a.created_at_ms);
    expect(times).toEqual([...times].sort((a, b) => a - b));
    expect(ctx.chain.at(-1)?.id).toBe(l3v2.id);
    // one round trip per level, and nothing else
    expect(fetches).toBe(10);
    expect(calls.evalsha).toBe(10);
    // (each level is one pipeline: its HGETALLs and one script call for the threads)
  });

  it('missing and malformed ids are skipped, not fatal', async () => {
    const ok = artefact();
    await bb().createArtefact(ok);
    const broken = artefact().id;
    await bb().redis.hset(`holt:ctx:artefact:${broken}`, { id: broken, version: 'x' });
    const gone = artefact().id;
    const ctx = await assembleContext([ok.id, broken, gone], (ids) => contextLevel(bb(), ids));
    expect(ctx.chain.map((a) => a.id)).toEqual([ok.id]);
    expect(ctx.missing).toEqual([gone]);
    expect(ctx.malformed).toEqual([broken]);
  });
});
