import { createHash } from 'node:crypto';

// Loop detection, pure (docs/runtime-model.md § Tools): the loop keeps `LoopState` in its turn state and asks before each
// tool call; nothing here does I/O.

export interface Action {
  sig: string;
  /** Hash of the result, once executed. */
  resultHash?: string;
}

export interface LoopState {
  actions: Action[];
  /** Signatures blocked for the rest of the subtask (the turn when not planning). */
  blocked: string[];
}

export type LoopVerdict =
  | { ok: true }
  | { ok: false; rule: 'blocked' | 'repeat' | 'alternation' | 'same_result'; reason: string };

export const MAX_REPEATS = 3;
export const PATTERN_WINDOW = 10;

export const emptyLoopState = (): LoopState => ({ actions: [], blocked: [] });

/** tool name + arguments with sorted keys: the same call in any key order is the same action. */
export function signature(tool: string, args: unknown): string {
  return `${tool}:${stableJson(args)}`;
}

export function stableJson(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(stableJson).join(',')}]`;
  if (v && typeof v === 'object') {
    const o = v as Record<string, unknown>;
    return `{${Object.keys(o)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${stableJson(o[k])}`)
      .join(',')}}`;
  }
  return JSON.stringify(v) ?? 'null';
}

export const hashResult = (s: string) => createHash('sha256').update(s).digest('hex').slice(0, 16);

/** Before running `sig`: a blocked signature, a 3rd identical call, or A-B-A-B over the last 10 actions. */
export function checkAction(s: LoopState, sig: string): LoopVerdict {
  if (s.blocked.includes(sig))
    return { ok: false, rule: 'blocked', reason: 'this exact call was blocked earlier as a loop' };
  const recent = s.actions.slice(-PATTERN_WINDOW);
  const same = recent.filter((a) => a.sig === sig).length;
  if (same >= MAX_REPEATS - 1)
    return { ok: false, rule: 'repeat', reason: `the same call was already made ${same} times` };
  const seq = [...recent.map((a) => a.sig), sig].slice(-4);
  if (seq.length === 4 && seq[0] === seq[2] && seq[1] === seq[3] && seq[0] !== seq[1])
    return { ok: false, rule: 'alternation', reason: 'alternating between the same two calls (A-B-A-B)' };
  return { ok: true };
}

/**
 * After running `sig`: a read repeated with exactly the same result teaches nothing new, so the call
 * is blocked from now on (jetbox counts exploratory calls only when their result repeats).
 */
export function recordAction(
  s: LoopState,
  sig: string,
  resultHash: string,
): { state: LoopState; verdict: LoopVerdict } {
  const repeatedResult = s.actions.some((a) => a.sig === sig && a.resultHash === resultHash);
  const actions = [...s.actions, { sig, resultHash }].slice(-PATTERN_WINDOW * 5);
  if (!repeatedResult) return { state: { ...s, actions }, verdict: { ok: true } };
  return {
    state: { actions, blocked: [...s.blocked, sig] },
    verdict: {
      ok: false,
      rule: 'same_result',
      reason: 'the call returned exactly the same result as before',
    },
  };
}

/** A blocked attempt counts as an action (so A-B-A-B and repeats keep being seen) and blocks the call. */
export function recordBlock(s: LoopState, sig: string): LoopState {
  return {
    actions: [...s.actions, { sig }].slice(-PATTERN_WINDOW * 5),
    blocked: s.blocked.includes(sig) ? s.blocked : [...s.blocked, sig],
  };
}

/** A completed subtask starts afresh (jetbox): old blocks do not haunt the next subtask. */
export const clearBlocks = (s: LoopState): LoopState => ({ actions: s.actions, blocked: [] });
