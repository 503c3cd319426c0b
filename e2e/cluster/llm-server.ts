// The scripted OpenAI-compatible server (test/harness/llm.ts) as an in-cluster pod for the e2e: the
// runtime image's node runs it (type stripping). Replies come from /srv/script.json in order; every
// request's model and path is logged, so the test can read what the pup asked for.
import { readFileSync } from 'node:fs';
import { createServer, request } from 'node:http';
import { type ScriptedReply, startLlmServer } from '../../test/harness/llm.ts';

const script = JSON.parse(readFileSync('/srv/app/script.json', 'utf8')) as ScriptedReply[];
const llm = await startLlmServer(script);
const upstream = new URL(llm.url);
// The harness listens on the loopback: this front door on :8080 forwards to it and logs each request.
createServer((req, res) => {
  let body = '';
  req.on('data', (d: Buffer) => {
    body += d;
  });
  req.on('end', () => {
    let model = '';
    let user = '';
    let last = '';
    try {
      const b = JSON.parse(body) as {
        model?: string;
        messages?: { role: string; content?: string | null }[];
      };
      model = b.model ?? '';
      // What the model was shown (the first user message and the last message), for the test to read.
      user = (b.messages?.find((m) => m.role === 'user')?.content ?? '').slice(0, 2000);
      last = (b.messages?.at(-1)?.content ?? '').slice(0, 2000);
    } catch {}
    console.log(
      JSON.stringify({
        method: req.method,
        path: req.url,
        model,
        auth: Boolean(req.headers.authorization),
        user,
        last,
      }),
    );
    const fwd = request(
      {
        host: upstream.hostname,
        port: upstream.port,
        path: req.url,
        method: req.method,
        headers: req.headers,
      },
      (r) => {
        res.writeHead(r.statusCode ?? 502, r.headers);
        r.pipe(res);
      },
    );
    fwd.end(body);
  });
}).listen(8080, () => console.log('scripted LLM on :8080'));
