import { createHash } from 'node:crypto';
import { createServer } from 'node:http';

/**
 * A scripted OpenAI-compatible embeddings endpoint (`POST /v1/embeddings`), the one test double memory
 * tests may use besides the model: deterministic vectors in which words of one concept (a small
 * thesaurus: "car", "automobile", "vehicle") point the same way, so that meaning can be told from
 * words. Each word (or its concept) is a pseudo-random unit direction drawn from its hash; a text is
 * the normalised sum of its words' directions, stop words left out.
 */

export const EMBEDDING_DIM = 64;

const STOP = new Set(
  'a an and are as at be by did do does for from has have how i in is it its of on or our that the their this to was we were what when where which who why will with you your'.split(
    ' ',
  ),
);

/** Words of one concept share a direction. */
export const THESAURUS: Record<string, string> = {};
for (const group of [
  ['car', 'automobile', 'vehicle', 'sedan'],
  ['outage', 'downtime', 'incident', 'failure'],
  ['database', 'postgres', 'db', 'datastore'],
  ['deploy', 'release', 'rollout', 'ship', 'shipped'],
  ['bug', 'defect', 'fault', 'regression'],
  ['fast', 'quick', 'speedy', 'latency'],
  ['approve', 'approved', 'accept', 'sign-off'],
  ['invoice', 'bill', 'billing', 'payment'],
  ['cache', 'redis', 'memoize'],
  ['customer', 'client', 'user', 'account'],
])
  for (const w of group) THESAURUS[w] = group[0]!;

function direction(concept: string, dim: number): number[] {
  const out: number[] = [];
  let block = 0;
  while (out.length < dim) {
    const h = createHash('sha256').update(`${concept}#${block++}`).digest();
    for (let i = 0; i + 1 < h.length && out.length < dim; i += 2)
      out.push((h.readUInt16BE(i) - 32767.5) / 32767.5);
  }
  const n = Math.sqrt(out.reduce((s, x) => s + x * x, 0));
  return out.map((x) => x / n);
}

/** The vector of a text (what the server answers for it). */
export function embedText(text: string, dim = EMBEDDING_DIM): number[] {
  const words = (text.toLowerCase().match(/[\p{L}\p{N}-]+/gu) ?? []).filter((w) => !STOP.has(w));
  const v = new Array<number>(dim).fill(0);
  for (const w of words) {
    const d = direction(THESAURUS[w] ?? w, dim);
    for (let i = 0; i < dim; i++) v[i]! += d[i]!;
  }
  const n = Math.sqrt(v.reduce((s, x) => s + x * x, 0));
  return n === 0 ? v : v.map((x) => x / n);
}

export interface EmbeddingsServer {
  /** The base URL an OpenAI client takes (`…/v1`). */
  url: string;
  /** Each request's inputs and its Authorization header. */
  requests: { input: string[]; model: string; authorization?: string }[];
  /** Answers the next `n` requests with this HTTP status (a failing endpoint). */
  failNext(n: number, status?: number): void;
  close(): Promise<void>;
}

export async function startEmbeddingsServer(dim = EMBEDDING_DIM): Promise<EmbeddingsServer> {
  const requests: EmbeddingsServer['requests'] = [];
  let failing = 0;
  let failStatus = 503;
  const server = createServer((req, res) => {
    let body = '';
    req.on('data', (c) => {
      body += c;
    });
    req.on('end', () => {
      const send = (status: number, json: unknown) => {
        res.writeHead(status, { 'content-type': 'application/json' });
        res.end(JSON.stringify(json));
      };
      if (req.method !== 'POST' || !req.url?.endsWith('/embeddings'))
        return send(404, { error: { message: 'not found' } });
      let parsed: { input?: unknown; model?: unknown };
      try {
        parsed = JSON.parse(body);
      } catch {
        return send(400, { error: { message: 'bad json' } });
      }
      const input = typeof parsed.input === 'string' ? [parsed.input] : (parsed.input as string[]);
      requests.push({
        input,
        model: String(parsed.model),
        ...(req.headers.authorization ? { authorization: req.headers.authorization } : {}),
      });
      if (failing > 0) {
        failing--;
        return send(failStatus, { error: { message: 'scripted failure' } });
      }
      send(200, {
        object: 'list',
        model: parsed.model,
        data: input.map((t, index) => ({ object: 'embedding', index, embedding: embedText(t, dim) })),
        usage: { prompt_tokens: 0, total_tokens: 0 },
      });
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as { port: number };
  return {
    url: `http://127.0.0.1:${port}/v1`,
    requests,
    failNext(n, status = 503) {
      failing = n;
      failStatus = status;
    },
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}
