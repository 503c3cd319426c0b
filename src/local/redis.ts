import { mkdirSync, writeFileSync } from 'node:fs';
import { createConnection } from 'node:net';
import { join } from 'node:path';
import { REDIS_USER } from '../access/redis.ts';
import { findBinary } from './bins.ts';
import { freePort, retryOnPortClash } from './ports.ts';
import { managed, type ServerProcess, spawnServer, waitReady } from './proc.ts';
import { makeTempDir } from './tmp.ts';

export interface RedisServer {
  url: string;
  port: number;
  dir: string;
  proc: ServerProcess;
  stop(): Promise<void>;
  /** Stops the server (down `downMs`) and starts it again on the same port and data dir. */
  restart(downMs?: number): Promise<void>;
}

export interface RedisOptions {
  /** Append-only file with fsync on every write, for durability tests. */
  aof?: boolean | 'everysec';
  /** A persistent data directory (kept on stop); a fresh temp dir by default. */
  dir?: string;
  port?: number;
  /**
   * ACL `user` lines (src/access/redis.ts). Without them the server has no password (tests of the
   * blackboard itself); `holt up` always passes them, so its Redis refuses anyone without a user.
   */
  acl?: string[];
  /** The password of the `admin` user, for probes of this server (with `acl`). */
  adminPassword?: string;
}

/** The process id of the Redis server on `port` (from INFO server), asked as `admin` with a password. */
export function redisServerPid(port: number, password?: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const auth = password ? `AUTH ${REDIS_USER.admin} ${password}\r\n` : '';
    const sock = createConnection({ host: '127.0.0.1', port }, () => sock.write(`${auth}INFO server\r\n`));
    sock.setTimeout(1000, () => sock.destroy(new Error('timeout')));
    let buf = '';
    sock.on('data', (d) => {
      buf += d.toString();
      if (buf.startsWith('-') || /\r\n-/.test(buf)) return sock.destroy(new Error(buf.trim().slice(0, 200)));
      const m = /process_id:(\d+)/.exec(buf);
      if (!m) return;
      resolve(Number(m[1]));
      sock.end();
    });
    sock.once('error', reject);
  });
}

/** A Redis server on free loopback ports (a new pick when another process took one first). */
export function startRedis(opts: RedisOptions = {}): Promise<RedisServer> {
  return opts.port === undefined ? retryOnPortClash(() => startRedisOnce(opts)) : startRedisOnce(opts);
}

async function startRedisOnce(opts: RedisOptions): Promise<RedisServer> {
  const bin = findBinary('redis-server', ['/usr/bin', '/usr/local/bin']);
  const dir = opts.dir ?? makeTempDir('redis');
  const keep = opts.dir !== undefined;
  mkdirSync(dir, { recursive: true });
  const port = opts.port ?? (await freePort());
  // Everything in a 0600 file: passwords never on a command line (ps shows those to every user).
  const conf = join(dir, 'redis.conf');
  const lines = [
    `port ${port}`,
    'bind 127.0.0.1',
    `dir "${dir}"`,
    'save ""',
    'daemonize no',
    'protected-mode yes',
    'loglevel warning',
    // The blackboard is data, not a cache: never evict it (with a maxmemory, writes fail instead).
    'maxmemory-policy noeviction',
    ...(opts.aof
      ? ['appendonly yes', `appendfsync ${opts.aof === 'everysec' ? 'everysec' : 'always'}`]
      : ['appendonly no']),
    ...(opts.acl ?? []),
  ];
  writeFileSync(conf, `${lines.join('\n')}\n`, { mode: 0o600 });
  const launch = async (): Promise<ServerProcess> => {
    const proc = spawnServer({ name: 'redis', command: bin, args: [conf], dir });
    // Ready when the server on the port is this process: another Redis that holds the port would
    // answer a PING too, while this one exits for want of it.
    await waitReady(proc, async () => (await redisServerPid(port, opts.adminPassword)) === proc.child.pid);
    return proc;
  };
  const cred = opts.adminPassword ? `${REDIS_USER.admin}:${opts.adminPassword}@` : '';
  return managed(launch, dir, keep, { url: `redis://${cred}127.0.0.1:${port}`, port, dir });
}
