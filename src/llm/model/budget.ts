import { backoffMs } from '../../common/backoff.ts';
import type { BudgetSettings } from '../config.ts';
import type { Usage } from './model.ts';

// Budgets, pure (docs/runtime-model.md § Budgets and error classes): rolling windows for calls and tokens, a total cost with no debt, and a
// consecutive-error governor. The ledger rows come from Postgres (shared by every pup of the role).

export interface UsageRecord {
  atMs: number;
  tokens: number;
  costUsd: number;
}

export interface Ledger {
  /** Calls inside the window (newest last). */
  window: UsageRecord[];
  /** Cost of every call ever made by the role. */
  totalCostUsd: number;
}

export interface Prices {
  inputPerMTok: number;
  outputPerMTok: number;
}

export const costOf = (u: Pick<Usage, 'promptTokens' | 'completionTokens'>, p: Prices) =>
  (u.promptTokens * p.inputPerMTok + u.completionTokens * p.outputPerMTok) / 1_000_000;

/** A crude upper estimate of a call before it is made: 4 characters per token, plus the reply cap. */
export function estimateCall(promptChars: number, maxTokens: number | undefined): Usage {
  const promptTokens = Math.ceil(promptChars / 4);
  const completionTokens = maxTokens ?? 1024;
  return { promptTokens, completionTokens, totalTokens: promptTokens + completionTokens };
}

export type BudgetVerdict =
  | { ok: true }
  | { ok: false; limit: 'calls' | 'tokens' | 'cost'; reason: string; retryAtMs?: number };

/** No debt: a call that would go over any limit is not made. `retryAtMs` when the window will free up. */
export function checkBudget(
  l: Ledger,
  b: BudgetSettings,
  estimate: Usage,
  estimateCostUsd: number,
  nowMs: number,
): BudgetVerdict {
  const inWindow = l.window.filter((r) => r.atMs > nowMs - b.windowMs);
  const freesAt = (i: number) => (inWindow[i]?.atMs ?? nowMs) + b.windowMs;
  if (b.calls !== undefined && inWindow.length + 1 > b.calls)
    return {
      ok: false,
      limit: 'calls',
      reason: `call budget exhausted: ${inWindow.length}/${b.calls} calls in the last ${b.windowMs / 1000}s`,
      retryAtMs: freesAt(inWindow.length - b.calls),
    };
  if (b.tokens !== undefined) {
    const used = inWindow.reduce((n, r) => n + r.tokens, 0);
    if (used + estimate.totalTokens > b.tokens) {
      // The window frees once enough of the oldest calls leave it.
      let freed = 0;
      let i = 0;
      while (i < inWindow.length && used - freed + estimate.totalTokens > b.tokens)
        freed += inWindow[i++]!.tokens;
      return {
        ok: false,
        limit: 'tokens',
        reason: `token budget exhausted: ${used} used + ~${estimate.totalTokens} needed > ${b.tokens} per ${b.windowMs / 1000}s`,
        retryAtMs: used - freed + estimate.totalTokens <= b.tokens ? freesAt(i - 1) : undefined,
      };
    }
  }
  if (b.costUsd !== undefined && l.totalCostUsd + estimateCostUsd > b.costUsd)
    return {
      ok: false,
      limit: 'cost',
      reason: `cost budget exhausted: $${l.totalCostUsd.toFixed(4)} spent + ~$${estimateCostUsd.toFixed(4)} > $${b.costUsd}`,
    };
  return { ok: true };
}

export interface ErrorState {
  consecutive: number;
  pausedUntilMs?: number;
}

/** After a failed call: exponential backoff before the next one, and a pause after N in a row. */
export function afterError(
  s: ErrorState,
  b: BudgetSettings,
  nowMs: number,
): ErrorState & { delayMs: number } {
  const consecutive = s.consecutive + 1;
  if (consecutive >= b.maxConsecutiveErrors)
    return { consecutive, pausedUntilMs: nowMs + b.errorPauseMs, delayMs: 0 };
  return {
    consecutive,
    delayMs: backoffMs(consecutive - 1, { baseMs: b.errorBaseMs, maxMs: 60_000, jitter: 'none' }),
  };
}

export const afterSuccess = (): ErrorState => ({ consecutive: 0 });
