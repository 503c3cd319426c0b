import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type RedisServer, startRedis } from '../../test/harness/redis.ts';
import { recordSpans } from '../../test/harness/spans.ts';
import { eventually } from '../../test/harness/wait.ts';
import { Blackboard } from '../blackboard/client.ts';
import { claim } from '../blackboard/testkit.ts';
import { silentLogger } from '../common/logger.ts';
import { reportLateBid } from './late-bid-report.ts';
import { OrchestratorMetrics } from './metrics.ts';

// A late bid is marked in its claim's trace (the bidder's own bid span cannot know it was late).
const TRACE = '4bf92f3577b34da6a3ce929d0e0e4736';
const CLAIM_SPAN = '00f067aa0ba902b7';
const { spans, stop: stopTracing } = recordSpans('orchestrator');
let redis: RedisServer;
let bb: Blackboard;

beforeAll(async () => {
  redis = await startRedis();
  bb = Blackboard.connect(redis.url, 'late-bid');
});
afterAll(async () => {
  await bb?.close();
  await redis?.stop();
  await stopTracing();
});

describe('a late bid', () => {
  it("is a bid_late span in its claim's trace, with how late it was, and counted", async () => {
    const c = claim(crypto.randomUUID(), { traceparent: `00-${TRACE}-${CLAIM_SPAN}-01` });
    await bb.createClaim(c);
    const metrics = new OrchestratorMetrics();
    reportLateBid(
      { bb, log: silentLogger(), metrics },
      { claimId: c.id, role: 'Hung', bidType: 'exclusive', lateByMs: 1234 },
    );
    const span = await eventually('the bid_late span', () =>
      spans.getFinishedSpans().find((s) => s.name === 'bid_late Hung'),
    );
    expect(span.spanContext().traceId).toBe(TRACE);
    expect(span.parentSpanContext?.spanId).toBe(CLAIM_SPAN);
    expect(span.attributes).toMatchObject({
      'gen_ai.agent.name': 'Hung',
      'holt.claim.id': c.id,
      'holt.bid.type': 'exclusive',
      'holt.bid.late_by_ms': 1234,
      'holt.bid.outcome': 'ignored_late',
    });
    expect((await metrics.lateBids.get()).values).toEqual([
      expect.objectContaining({ labels: { role: 'Hung' }, value: 1 }),
    ]);
  });
});
