import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * The one test double of the project (CONTRIBUTING.md § What a change needs): a local OpenAI-compatible server
 * (`POST /v1/chat/completions`) that replays scripted replies, streamed (SSE) when asked, and records
 * every request. Replies: text, tool calls, an HTTP status (429, 500...), malformed JSON, a hang, or
 * a reply held back until a promise resolves.
 */
export type ScriptedReply =
  | { text: string; usage?: Usage }
  | {
      toolCalls: { name: string; arguments: string | Record<string, unknown> }[];
      text?: string;
      usage?: Usage;
    }
  /** An HTTP error; `headers` replace the default `retry-after-ms: 10` (e.g. a real Retry-After). */
  | { status: number; body?: string; headers?: Record<string, string> }
  | { malformed: true }
  | { hang: true }
  /** `reply`, sent only once `after` resolves (a request held open while a test freezes its client). */
  | { after: Promise<unknown>; reply: ScriptedReply };

export interface Usage {
  prompt_tokens: number;
  completion_tokens: number;
}

export interface RecordedRequest {
  headers: IncomingMessage['headers'];
  body: {
    model?: string;
    stream?: boolean;
    messages: { role: string; content?: string | null; tool_call_id?: string; tool_calls?: unknown[] }[];
    tools?: { function: { name: string; parameters: { properties?: Record<string, unknown> } } }[];
    response_format?: unknown;
  };
}

export interface LlmServer {
  /** Base URL to give the client (ends in /v1). */
  url: string;
  requests: RecordedRequest[];
  /** Replaces the script (and forgets recorded requests). */
  reset(script: ScriptedReply[]): void;
  push(...replies: ScriptedReply[]): void;
  /** Resolves once `n` requests have arrived. */
  waitForRequests(n: number, limitMs?: number): Promise<void>;
  close(): Promise<void>;
}

export const text = (t: string): ScriptedReply => ({ text: t });
export const call = (name: string, args: Record<string, unknown> | string = {}): ScriptedReply => ({
  toolCalls: [{ name, arguments: args }],
});
export const submit = (payload: string, type = 'Result', summary = 'done'): ScriptedReply =>
  call('submit_result', { artefact_type: type, artefact_payload: payload, summary });

const DEFAULT_USAGE: Usage = { prompt_tokens: 100, completion_tokens: 20 };

export async function startLlmServer(script: ScriptedReply[] = []): Promise<LlmServer> {
  let queue = [...script];
  const requests: RecordedRequest[] = [];
  const waiters: (() => void)[] = [];
  const hung: ServerResponse[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      if (req.method !== 'POST' || !req.url?.endsWith('/chat/completions')) {
        res.writeHead(404).end();
        return;
      }
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as RecordedRequest['body'];
      requests.push({ headers: req.headers, body });
      for (const w of waiters.splice(0)) w();
      const reply = queue.shift() ?? { status: 500, body: '{"error":{"message":"script exhausted"}}' };
      respond(res, reply, body.stream === true, requests.length, hung);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}/v1`,
    requests,
    reset(s) {
      queue = [...s];
      requests.length = 0;
    },
    push(...r) {
      queue.push(...r);
    },
    async waitForRequests(n, limitMs = 20_000) {
      const deadline = Date.now() + limitMs;
      while (requests.length < n) {
        if (Date.now() > deadline)
          throw new Error(`llm harness: gave up waiting for ${n} requests (got ${requests.length})`);
        await new Promise<void>((r) => {
          waiters.push(r);
          setTimeout(r, 100);
        });
      }
    },
    async close() {
      for (const r of hung) r.destroy();
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}

function respond(
  res: ServerResponse,
  reply: ScriptedReply,
  stream: boolean,
  n: number,
  hung: ServerResponse[],
): void {
  if ('hang' in reply) {
    hung.push(res);
    return;
  }
  if ('after' in reply) {
    hung.push(res);
    void reply.after.then(() => {
      if (!res.destroyed && !res.writableEnded) respond(res, reply.reply, stream, n, hung);
    });
    return;
  }
  if ('status' in reply) {
    res.writeHead(reply.status, {
      'content-type': 'application/json',
      ...(reply.headers ?? { 'retry-after-ms': '10' }),
    });
    res.end(reply.body ?? `{"error":{"message":"scripted ${reply.status}"}}`);
    return;
  }
  if ('malformed' in reply) {
    if (stream) {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.end('data: {"choices": [ this is not json\n\n');
    } else {
      res.writeHead(200, { 'content-type': 'application/json' }).end('{"choices": [ this is not json');
    }
    return;
  }
  const content = 'text' in reply ? (reply.text ?? '') : '';
  const calls =
    'toolCalls' in reply
      ? reply.toolCalls.map((c, i) => ({
          id: `srv_${n}_${i}`,
          type: 'function' as const,
          function: {
            name: c.name,
            arguments: typeof c.arguments === 'string' ? c.arguments : JSON.stringify(c.arguments),
          },
        }))
      : [];
  const usage = { ...(reply.usage ?? DEFAULT_USAGE) };
  const u = { ...usage, total_tokens: usage.prompt_tokens + usage.completion_tokens };
  const finish = calls.length ? 'tool_calls' : 'stop';
  const id = `chatcmpl-${n}`;
  const meta = { id, object: 'chat.completion', created: Math.floor(Date.now() / 1000), model: 'scripted' };
  if (!stream) {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(
      JSON.stringify({
        ...meta,
        choices: [
          {
            index: 0,
            message: { role: 'assistant', content, ...(calls.length ? { tool_calls: calls } : {}) },
            finish_reason: finish,
          },
        ],
        usage: u,
      }),
    );
    return;
  }
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
  const send = (o: unknown) =>
    res.write(`data: ${JSON.stringify({ ...meta, object: 'chat.completion.chunk', ...(o as object) })}\n\n`);
  send({ choices: [{ index: 0, delta: { role: 'assistant', content: '' }, finish_reason: null }] });
  // Content in pieces, tool calls as name first and arguments in two halves: what real servers do.
  for (const piece of content.match(/.{1,7}/gs) ?? [])
    send({ choices: [{ index: 0, delta: { content: piece }, finish_reason: null }] });
  calls.forEach((c, i) => {
    send({
      choices: [
        {
          index: 0,
          delta: {
            tool_calls: [
              { index: i, id: c.id, type: 'function', function: { name: c.function.name, arguments: '' } },
            ],
          },
          finish_reason: null,
        },
      ],
    });
    const a = c.function.arguments;
    const half = Math.ceil(a.length / 2);
    for (const part of [a.slice(0, half), a.slice(half)])
      if (part)
        send({
          choices: [
            {
              index: 0,
              delta: { tool_calls: [{ index: i, function: { arguments: part } }] },
              finish_reason: null,
            },
          ],
        });
  });
  send({ choices: [{ index: 0, delta: {}, finish_reason: finish }] });
  send({ choices: [], usage: u });
  res.end('data: [DONE]\n\n');
}
