import { createServer, type Server } from 'node:http';
import type { Registry } from 'prom-client';
import { errorMessage } from './errors.ts';

export interface Check {
  ok: boolean;
  /** Why it is not ok (shown in the JSON body of a 503). */
  reason?: string;
  details?: Record<string, unknown>;
}

export interface ProbeServerOptions {
  port: number;
  host?: string;
  healthz: () => Promise<Check>;
  readyz?: () => Promise<Check>;
  registry?: Registry;
}

/** `/healthz` and `/readyz` (200 or 503 with a JSON reason) and `/metrics` (Prometheus text). */
export async function startProbeServer(
  opts: ProbeServerOptions,
): Promise<{ server: Server; port: number; close(): Promise<void> }> {
  const server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res.writeHead(405, { allow: 'GET' }).end();
      return;
    }
    const reply = (check: Check) => {
      const body = check.ok
        ? { status: 'healthy', ...check.details }
        : { status: 'unhealthy', error: check.reason ?? 'unknown', ...check.details };
      res.writeHead(check.ok ? 200 : 503, { 'content-type': 'application/json' }).end(JSON.stringify(body));
    };
    const run = (probe: () => Promise<Check>) =>
      probe().then(reply, (e: unknown) => reply({ ok: false, reason: errorMessage(e) }));
    if (path === '/healthz') return void run(opts.healthz);
    if (path === '/readyz') return void run(opts.readyz ?? opts.healthz);
    if (path === '/metrics' && opts.registry) {
      const registry = opts.registry;
      registry.metrics().then(
        (text) => res.writeHead(200, { 'content-type': registry.contentType }).end(text),
        () => res.writeHead(500).end(),
      );
      return;
    }
    res.writeHead(404).end();
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port, opts.host ?? '0.0.0.0', () => resolve());
  });
  const addr = server.address();
  const port = typeof addr === 'object' && addr ? addr.port : opts.port;
  return {
    server,
    port,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
