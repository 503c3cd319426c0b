import { execFileSync } from 'node:child_process';
import { chownSync, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import pg from 'pg';
import { newPassword } from '../access/principals.ts';
import { withClient } from '../common/pg.ts';
import { postgresBinDir } from './bins.ts';
import { freePort, retryOnPortClash } from './ports.ts';
import { type ServerProcess, spawnServer, waitReady } from './proc.ts';
import { makeTempDir, removeDir } from './tmp.ts';

export interface PostgresServer {
  /** Connection string of the test file's own database. */
  url: string;
  port: number;
  database: string;
  proc: ServerProcess;
  /** A connection string for another fresh database on the same server. */
  createDatabase(name: string): Promise<string>;
  stop(): Promise<void>;
}

/** Postgres refuses to run as root: as root, drop to the `postgres` user (Debian's package creates it). */
function runAs(): { uid: number; gid: number } | undefined {
  if (process.getuid?.() !== 0) return undefined;
  try {
    const uid = Number(execFileSync('id', ['-u', 'postgres']).toString().trim());
    const gid = Number(execFileSync('id', ['-g', 'postgres']).toString().trim());
    return { uid, gid };
  } catch {
    throw new Error('running as root needs the `postgres` user to start Postgres: run `make setup`');
  }
}

const USER = 'holt';

export interface PostgresOptions {
  database?: string;
  /** A persistent directory (initdb only the first time; kept on stop); a fresh temp dir by default. */
  dir?: string;
  port?: number;
}

/** A Postgres server on a free loopback port (a new pick when another process took it first). */
export function startPostgres(opts: PostgresOptions | string = {}): Promise<PostgresServer> {
  const o = typeof opts === 'string' ? { database: opts } : opts;
  return o.port === undefined ? retryOnPortClash(() => startPostgresOnce(o)) : startPostgresOnce(o);
}

async function startPostgresOnce(o: PostgresOptions): Promise<PostgresServer> {
  const database = o.database ?? 'holt_test';
  const bin = postgresBinDir();
  const dir = o.dir ?? makeTempDir('pg');
  const keep = o.dir !== undefined;
  const data = join(dir, 'data');
  const sock = join(dir, 'sock');
  const fresh = !existsSync(join(data, 'PG_VERSION'));
  // The parents must be traversable by the postgres user; only the data dir itself is private.
  mkdirSync(dir, { recursive: true, mode: 0o755 });
  mkdirSync(data, { recursive: true, mode: 0o700 });
  mkdirSync(sock, { recursive: true });
  // The superuser's password, kept beside the data (0600): every connection needs it, even on the loopback.
  const pwFile = join(dir, 'superuser.password');
  if (fresh) writeFileSync(pwFile, newPassword(), { mode: 0o600 });
  // A data dir made before passwords (trust) keeps working without one.
  const password = existsSync(pwFile) ? readFileSync(pwFile, 'utf8').trim() : '';
  const ids = runAs();
  if (ids) {
    chownSync(data, ids.uid, ids.gid);
    chownSync(sock, ids.uid, ids.gid);
  }
  if (fresh) {
    // initdb reads the password from a file the postgres user can read; it goes once initdb is done.
    const initPw = join(sock, 'initdb.pw');
    writeFileSync(initPw, password, { mode: 0o600 });
    if (ids) chownSync(initPw, ids.uid, ids.gid);
    try {
      execFileSync(
        join(bin, 'initdb'),
        [
          '-D',
          data,
          '-U',
          USER,
          '-A',
          'scram-sha-256',
          `--pwfile=${initPw}`,
          '--no-sync',
          '-E',
          'UTF8',
          '--locale',
          'C',
        ],
        { stdio: 'pipe', uid: ids?.uid, gid: ids?.gid, env: { ...process.env, LC_ALL: 'C' } },
      );
    } finally {
      rmSync(initPw, { force: true });
    }
  }
  const port = o.port ?? (await freePort());
  const proc = spawnServer({
    name: 'postgres',
    command: join(bin, 'postgres'),
    args: [
      '-D',
      data,
      '-p',
      String(port),
      '-k',
      sock,
      '-c',
      'listen_addresses=127.0.0.1',
      '-c',
      'fsync=off',
      '-c',
      'synchronous_commit=off',
      '-c',
      'full_page_writes=off',
      '-c',
      'max_connections=200',
    ],
    dir,
    uid: ids?.uid,
    gid: ids?.gid,
  });
  const base = `postgres://${USER}${password ? `:${password}` : ''}@127.0.0.1:${port}`;
  await waitReady(proc, async () => {
    // Bounded: a port another server took in the meantime may accept and never answer as Postgres
    // would, and an unbounded connect would hang the start instead of seeing the clash.
    const c = new pg.Client({ connectionString: `${base}/postgres`, connectionTimeoutMillis: 3_000 });
    await c.connect();
    await c.end();
    return true;
  });
  const createDatabase = async (name: string): Promise<string> => {
    await withClient(`${base}/postgres`, (c) => c.query(`CREATE DATABASE ${pg.escapeIdentifier(name)}`));
    return `${base}/${name}`;
  };
  const exists = () =>
    withClient(
      `${base}/postgres`,
      async (c) => (await c.query('SELECT 1 FROM pg_database WHERE datname = $1', [database])).rowCount === 1,
    );
  return {
    url: (await exists()) ? `${base}/${database}` : await createDatabase(database),
    port,
    database,
    proc,
    createDatabase,
    async stop() {
      // SIGINT is Postgres's "fast shutdown": aborts sessions, exits cleanly.
      proc.child.kill('SIGINT');
      await proc.stop(5000);
      if (!keep) removeDir(dir);
    },
  };
}
