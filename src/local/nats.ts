import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { findBinary } from './bins.ts';
import { freePort, retryOnPortClash } from './ports.ts';
import { managed, type ServerProcess, spawnServer, waitReady } from './proc.ts';
import { makeTempDir } from './tmp.ts';

export interface NatsServer {
  url: string;
  port: number;
  monitorUrl: string;
  proc: ServerProcess;
  stop(): Promise<void>;
  restart(downMs?: number): Promise<void>;
}

export interface NatsOptions {
  /** A persistent directory (kept on stop); a fresh temp dir by default. */
  dir?: string;
  port?: number;
  /** Require this user and password (in the URL, as the operator's bundled NATS has them). */
  auth?: { user: string; pass: string };
  /** An `authorization` block (src/access/nats.ts): users with subject permissions; `url` is then anonymous. */
  authorization?: string;
}

/** A Nats server on free loopback ports (a new pick when another process took one first). */
export function startNats(opts: NatsOptions = {}): Promise<NatsServer> {
  return opts.port === undefined ? retryOnPortClash(() => startNatsOnce(opts)) : startNatsOnce(opts);
}

async function startNatsOnce(opts: NatsOptions): Promise<NatsServer> {
  const bin = findBinary('nats-server', ['/usr/sbin', '/usr/bin', '/usr/local/bin']);
  const dir = opts.dir ?? makeTempDir('nats');
  const keep = opts.dir !== undefined;
  mkdirSync(dir, { recursive: true });
  const port = opts.port ?? (await freePort());
  const monitor = await freePort();
  // A 0600 config file: passwords never on a command line.
  const conf = join(dir, 'nats.conf');
  const q = JSON.stringify;
  const auth = opts.auth
    ? `authorization { user: ${q(opts.auth.user)}, password: ${q(opts.auth.pass)} }`
    : (opts.authorization ?? '');
  const text = [
    'host: "127.0.0.1"',
    `port: ${port}`,
    `http: "127.0.0.1:${monitor}"`,
    `jetstream { store_dir: ${q(join(dir, 'js'))} }`,
    auth,
  ].join('\n');
  writeFileSync(conf, `${text}\n`, { mode: 0o600 });
  const args = ['-c', conf];
  const cred = opts.auth
    ? `${encodeURIComponent(opts.auth.user)}:${encodeURIComponent(opts.auth.pass)}@`
    : '';
  const launch = async (): Promise<ServerProcess> => {
    const proc = spawnServer({ name: 'nats', command: bin, args, dir });
    await waitReady(proc, async () => {
      // Bounded, as every readiness probe: a port taken by another server must not hang the start.
      const res = await fetch(`http://127.0.0.1:${monitor}/healthz?js-enabled-only=true`, {
        signal: AbortSignal.timeout(3_000),
      });
      return res.ok;
    });
    return proc;
  };
  return managed(launch, dir, keep, {
    url: `nats://${cred}127.0.0.1:${port}`,
    port,
    monitorUrl: `http://127.0.0.1:${monitor}`,
  });
}
