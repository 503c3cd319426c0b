import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { exportSpansToJaeger, type JaegerSpans } from '../../test/harness/jaeger-spans.ts';
import { type RedisServer, startRedis } from '../../test/harness/redis.ts';
import { Blackboard } from '../blackboard/client.ts';
import { claim } from '../blackboard/testkit.ts';
import { silentLogger } from '../common/logger.ts';
import { reportLateBid } from './late-bid-report.ts';
import { OrchestratorMetrics } from './metrics.ts';

// A late bid is marked in its claim's trace (the bidder's own bid span cannot know it was late), as a
// real Jaeger receives it.
const TRACE = '4bf92f3577b34da6a3ce929d0e0e4736';
const CLAIM_SPAN = '00f067aa0ba902b7';
let jaeger: JaegerSpans;
let redis: RedisServer;
let bb: Blackboard;

beforeAll(async () => {
  [redis, jaeger] = await Promise.all([startRedis(), exportSpansToJaeger('orchestrator')]);
  bb = Blackboard.connect(redis.url, 'late-bid');
});
afterAll(async () => {
  await bb?.close();
  await redis?.stop();
  await jaeger?.stop();
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
    const [span] = await jaeger.named(TRACE, 'bid_late Hung');
    expect(span?.parentSpanId).toBe(CLAIM_SPAN);
    expect(span?.service).toBe('holt-orchestrator');
    expect(span?.attributes).toMatchObject({
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
