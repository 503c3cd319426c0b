import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startLifeIngress, useRuntimeStores } from '../../test/harness/llm-runtime.ts';
import { makeTempDir, removeDir } from '../../test/harness/tmp.ts';
import { AgentSpec } from '../api/agent.ts';
import { registrationOf } from '../api/registry.ts';
import type { IngressServer } from '../ingress/server.ts';
import { createToken, tokenSource } from '../ingress/tokens.ts';
import { ensureSchema } from '../state/migrate.ts';

// The A2A routes' admission and edges, as raw JSON-RPC over the real ingress (no pup: messages only
// queue): the same token checks as a message, file parts and priorities, ListTasks, a blocking send's
// limit, an agent not served over A2A. The protocol itself is src/a2a/python.test.ts's.

const stores = useRuntimeStores('a2a-edges-ws');
let dir: string;
let file: string;
let ingress: IngressServer | undefined;
let n = 0;
const CARD = { description: 'Edges.', skills: [] };

beforeAll(() => {
  dir = makeTempDir('a2a-edges');
  file = join(dir, 'tokens.json');
});
afterEach(async () => {
  await ingress?.close();
  ingress = undefined;
});
afterAll(() => removeDir(dir));

const token = (o: Parameters<typeof createToken>[1]) => createToken(file, o).token;
const serve = async (card: typeof CARD | null = CARD, blockMs?: number) => {
  ingress = await startLifeIngress(
    stores,
    `edges${++n}`,
    tokenSource(file, () => undefined),
    card,
    {
      ...(blockMs !== undefined ? { blockMs } : {}),
    },
  );
  return `http://127.0.0.1:${ingress.port}/a2a/coder`;
};
/** A JSON-RPC answer (result shapes are the A2A spec's, read loosely), or a non-JSON body. */
interface RpcBody {
  // biome-ignore lint/suspicious/noExplicitAny: the test reads deep into A2A's JSON
  result?: Record<string, any>;
  error?: { code: number; message: string };
  raw?: string;
}
const rpc = async (
  url: string,
  tok: string,
  method: string,
  params: unknown,
  headers: Record<string, string> = {},
) => {
  const r = await fetch(url, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${tok}`,
      'content-type': 'application/json',
      'a2a-version': '1.0',
      ...headers,
    },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }),
  });
  const text = await r.text();
  const body: RpcBody = text.startsWith('{') ? (JSON.parse(text) as RpcBody) : { raw: text };
  return { status: r.status, body };
};
const message = (text: string, extra: Record<string, unknown> = {}) => ({
  message: { messageId: `m-${Math.random()}`, role: 'ROLE_USER', parts: [{ text }], ...extra },
  configuration: { returnImmediately: true },
});

describe('A2A routes of the ingress', () => {
  it("a store's failure reaches the caller as 'unavailable; retry', never its detail", async () => {
    // No schema yet (nothing migrated it): the store fails.
    const url = await serve();
    const ok = token({ name: `s-${n}`, role: 'coder', modes: ['enqueue_message'] });
    const r = await rpc(url, ok, 'SendMessage', message('hi'));
    expect(r.body.error).toMatchObject({ code: -32603, message: 'the agent store is unavailable; retry' });
    expect(JSON.stringify(r.body)).not.toContain('holt.');
    await ensureSchema(stores.postgres.url);
  });

  it('admits like a message: no token 401, a token of another agent 403, a wake-only token reads the card but sends nothing, a wrong type 415, too big 413', async () => {
    const url = await serve();
    const ok = token({ name: `ok-${n}`, role: 'coder', modes: ['enqueue_message'] });
    const other = token({ name: `other-${n}`, role: 'reviewer', modes: ['enqueue_message'] });
    const wake = token({ name: `wake-${n}`, role: 'coder', modes: ['wake_hint'] });
    expect((await fetch(`${url}/.well-known/agent-card.json`)).status).toBe(401);
    expect((await rpc(url, other, 'SendMessage', message('hi'))).status).toBe(403);
    const card = await fetch(`${url}/.well-known/agent-card.json`, {
      headers: { authorization: `Bearer ${wake}` },
    });
    expect(card.status).toBe(200);
    expect(((await card.json()) as { name: string }).name).toBe('coder');
    expect((await rpc(url, wake, 'SendMessage', message('hi'))).status).toBe(403);
    const bad = await fetch(url, {
      method: 'POST',
      headers: { authorization: `Bearer ${ok}`, 'content-type': 'text/plain' },
      body: 'x',
    });
    expect(bad.status).toBe(415);
    const big = await rpc(url, ok, 'SendMessage', message('x'.repeat(70_000)));
    expect(big.status).toBe(413);
    expect((await fetch(url, { headers: { authorization: `Bearer ${ok}` } })).status).toBe(405);
  });

  it("refuses file parts and priorities over the token's; labels a priority it allows; lists the token's tasks only", async () => {
    const url = await serve();
    const ok = token({ name: `p-${n}`, role: 'coder', modes: ['enqueue_message'], maxPriority: 5 });
    const other = token({ name: `q-${n}`, role: 'coder', modes: ['enqueue_message'] });
    const file = await rpc(url, ok, 'SendMessage', {
      message: {
        messageId: 'f1',
        role: 'ROLE_USER',
        parts: [{ url: 'http://x/y.pdf', mediaType: 'application/pdf' }],
      },
    });
    expect(file.body.error).toMatchObject({ code: -32602, message: expect.stringContaining('no files') });
    const nul = await rpc(url, ok, 'SendMessage', message('a\u0000b'));
    expect(nul.body.error).toMatchObject({ code: -32602, message: expect.stringContaining('NUL') });
    const high = await rpc(url, ok, 'SendMessage', message('urgent', { metadata: { priority: 7 } }));
    expect(high.body.error?.message).toContain('priority up to 5');
    const sent = await rpc(url, ok, 'SendMessage', message('urgent enough', { metadata: { priority: 4 } }));
    expect(sent.body.result?.task?.status?.state).toBe('TASK_STATE_SUBMITTED');
    const row = await stores.pool.query<{ labels: Record<string, unknown>; priority: number }>(
      `SELECT labels, priority FROM holt.agent_messages WHERE instance = $1 AND body = 'urgent enough'`,
      [`edges${n}`],
    );
    expect(row.rows[0]).toMatchObject({ priority: 4, labels: { origin: 'a2a', priority: 4 } });
    await rpc(url, other, 'SendMessage', message("another token's"));
    const listed = await rpc(url, ok, 'ListTasks', {});
    expect(listed.body.result?.tasks?.map((t: { id: string }) => t.id)).toEqual([sent.body.result?.task?.id]);
  });

  it('a blocking send returns the task as it is once HOLT_A2A_BLOCK_MS pass (nobody took it)', async () => {
    const url = await serve(CARD, 300);
    const ok = token({ name: `b-${n}`, role: 'coder', modes: ['enqueue_message'] });
    const r = await rpc(url, ok, 'SendMessage', {
      message: { messageId: 'b1', role: 'ROLE_USER', parts: [{ text: 'anyone?' }] },
    });
    expect(r.body.result?.task?.status?.state).toBe('TASK_STATE_SUBMITTED');
    // The same message again is the same task (its id is the idempotency key).
    const again = await rpc(url, ok, 'SendMessage', message('anyone?', { messageId: 'b1' }));
    expect(again.body.result?.task?.id).toBe(r.body.result?.task?.id);
  });

  it('an agent whose Agent turns A2A off is not served (404), and its registration carries no card', async () => {
    const url = await serve(null);
    const ok = token({ name: `o-${n}`, role: 'coder', modes: ['enqueue_message'] });
    expect((await rpc(url, ok, 'SendMessage', message('hi'))).status).toBe(404);
    const spec = (a2a: Record<string, unknown>) =>
      AgentSpec.parse({
        role: 'coder',
        bidding: { strategy: 'ignore' },
        llm: { model: 'm' },
        ingress: { enabled: true, a2a },
      });
    expect(registrationOf({ ...spec({ enabled: false }), role: 'coder' }).a2a).toBeUndefined();
    expect(registrationOf({ ...spec({ description: 'd' }), role: 'coder' }).a2a).toEqual({
      description: 'd',
      skills: [],
    });
  });
});
