import { contextFrom } from '../telemetry/carrier.ts';
import { GEN_AI, pastSpan } from '../telemetry/spans.ts';
import type { EndedWait } from './store.ts';

/**
 * A living agent's wait as a span, written when the turn it wakes starts (its times given: it covers
 * the whole wait though made at its end), under the span of the tool call that set it. A wait set
 * outside any trace has no span: there is nothing to hang it on.
 */
export function emitWaitSpans(role: string, turnId: string, waits: EndedWait[]): void {
  for (const w of waits) {
    if (!w.trace) continue;
    pastSpan(`life wait ${w.kind}`, {
      parent: contextFrom(w.trace),
      startMs: w.startMs,
      endMs: w.endMs,
      attributes: {
        [GEN_AI.agentName]: role,
        'holt.wait.id': w.id,
        'holt.wait.kind': w.kind,
        'holt.wait.outcome': w.outcome,
        'holt.life.turn.id': turnId,
      },
    });
  }
}
