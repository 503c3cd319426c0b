import { mkdirSync } from 'node:fs';
import { createConnection } from 'node:net';
import { findBinary } from './bins.ts';
import { freePort } from './ports.ts';
import { managed, type ServerProcess, spawnServer, waitReady } from './proc.ts';
import { makeTempDir } from './tmp.ts';

export interface RedisServer {
  url: string;
  port: number;
  dir: string;
  proc: ServerProcess;
  stop(): Promise<void>;
  /** Stops the server and starts it again on the same port and data dir (for durability tests). */
  restart(): Promise<void>;
}

export interface RedisOptions {
  /** Append-only file with fsync on every write, for durability tests. */
  aof?: boolean | 'everysec';
  /** A persistent data directory (kept on stop); a fresh temp dir by default. */
  dir?: string;
  port?: number;
}

/** Sends one inline command and resolves with the first reply line. */
export function redisCommand(port: number, cmd: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const sock = createConnection({ host: '127.0.0.1', port }, () => sock.write(`${cmd}\r\n`));
    sock.setTimeout(1000, () => sock.destroy(new Error('timeout')));
    sock.once('data', (d) => {
      resolve(d.toString().split('\r\n')[0] ?? '');
      sock.end();
    });
    sock.once('error', reject);
  });
}

export async function startRedis(opts: RedisOptions = {}): Promise<RedisServer> {
  const bin = findBinary('redis-server', ['/usr/bin', '/usr/local/bin']);
  const dir = opts.dir ?? makeTempDir('redis');
  const keep = opts.dir !== undefined;
  mkdirSync(dir, { recursive: true });
  const port = opts.port ?? (await freePort());
  const args = [
    '--port',
    String(port),
    '--bind',
    '127.0.0.1',
    '--dir',
    dir,
    '--save',
    '',
    '--daemonize',
    'no',
    '--protected-mode',
    'yes',
    '--loglevel',
    'warning',
    ...(opts.aof
      ? ['--appendonly', 'yes', '--appendfsync', opts.aof === 'everysec' ? 'everysec' : 'always']
      : ['--appendonly', 'no']),
  ];
  const launch = async (): Promise<ServerProcess> => {
    const proc = spawnServer({ name: 'redis', command: bin, args, dir });
    await waitReady(proc, async () => (await redisCommand(port, 'PING')) === '+PONG');
    return proc;
  };
  return managed(launch, dir, keep, { url: `redis://127.0.0.1:${port}`, port, dir });
}
