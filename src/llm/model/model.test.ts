import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type LlmServer, startLlmServer, text } from '../../../test/harness/llm.ts';
import { MAX_RETRY_AFTER_MS, OpenAiModel, retryAfterMs } from './model.ts';

let llm: LlmServer;
beforeAll(async () => {
  llm = await startLlmServer();
});
afterAll(() => llm?.close());

describe('Retry-After', () => {
  const h = (entries: Record<string, string>) => new Headers(entries);
  const now = Date.parse('2026-11-25T12:00:00Z');

  it('reads seconds, an HTTP date and retry-after-ms; caps it; ignores what it cannot read', () => {
    expect(retryAfterMs(h({ 'retry-after': '2' }), now)).toBe(2000);
    expect(retryAfterMs(h({ 'retry-after': '0.5' }), now)).toBe(500);
    expect(retryAfterMs(h({ 'retry-after': 'Wed, 25 Nov 2026 12:00:07 GMT' }), now)).toBe(7000);
    expect(retryAfterMs(h({ 'retry-after': 'Wed, 25 Nov 2026 11:00:00 GMT' }), now)).toBe(0);
    expect(retryAfterMs(h({ 'retry-after-ms': '250', 'retry-after': '9' }), now)).toBe(250);
    expect(retryAfterMs(h({ 'retry-after': '86400' }), now)).toBe(MAX_RETRY_AFTER_MS);
    expect(retryAfterMs(h({ 'retry-after': 'soon' }), now)).toBeUndefined();
    expect(retryAfterMs(h({}), now)).toBeUndefined();
    expect(retryAfterMs(undefined, now)).toBeUndefined();
  });

  for (const stream of [false, true])
    it(`a 429 with Retry-After waits what the server asked before the next attempt (${stream ? 'streamed' : 'plain'})`, async () => {
      llm.reset([{ status: 429, headers: { 'retry-after': '1' } }, text('after the wait')]);
      const model = new OpenAiModel({
        baseUrl: llm.url,
        model: 'scripted',
        maxRetries: 2,
        retryBaseMs: 1,
        timeoutMs: 10_000,
      });
      const waits: number[] = [];
      const started = Date.now();
      const reply = await model.chat(
        { messages: [{ role: 'user', content: 'hi' }], stream },
        { onRetry: (_e, _attempt, delayMs) => waits.push(delayMs) },
      );
      expect(reply.content).toBe('after the wait');
      expect(waits).toEqual([1000]);
      expect(llm.requests).toHaveLength(2);
      // The second request really came after the wait, not straight away.
      expect(Date.now() - started).toBeGreaterThanOrEqual(1000);
    });

  it('without Retry-After the backoff alone sets the wait', async () => {
    llm.reset([{ status: 503, headers: {} }, text('ok')]);
    const model = new OpenAiModel({
      baseUrl: llm.url,
      model: 'scripted',
      maxRetries: 1,
      retryBaseMs: 1,
      timeoutMs: 10_000,
    });
    const waits: number[] = [];
    await model.chat(
      { messages: [{ role: 'user', content: 'hi' }] },
      { onRetry: (_e, _a, d) => waits.push(d) },
    );
    expect(waits).toHaveLength(1);
    expect(waits[0]).toBeLessThan(1000);
  });
});
