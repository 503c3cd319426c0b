import { execFileSync } from 'node:child_process';
import { createConnection } from 'node:net';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually } from '../../../test/harness/wait.ts';
import { newPasswords, PRINCIPALS } from '../../access/principals.ts';
import { redisUrl } from '../../access/redis.ts';
import { HoltSpec } from '../../api/holt.ts';
import { freePort, retryOnPortClash } from '../../local/ports.ts';
import { type ServerProcess, spawnServer, waitReady } from '../../local/proc.ts';
import { redisServerPid } from '../../local/redis.ts';
import { makeTempDir, removeDir } from '../../local/tmp.ts';
import { bundledStore } from './bundled.ts';
import { passwordKey } from './stores.ts';

type Env = { name: string; value?: string; valueFrom?: { secretKeyRef?: { key: string } } };
type Container = { command: string[]; env: Env[]; livenessProbe: { exec: { command: string[] } } };

const owner = { apiVersion: 'holt.io/v1alpha1', kind: 'Holt', name: 'demo', namespace: 'team', uid: 'u1' };
const pw = newPasswords();
const container = (
  bundledStore(owner, 'redis', HoltSpec.parse({}).stores.redis)[0]!.spec as {
    template: { spec: { containers: Container[] } };
  }
).template.spec.containers[0]!;
/** The pod's environment as the kubelet would give it: the Secret's keys, a 256 MiB limit. */
const podEnv = Object.fromEntries(
  container.env.map((e) => {
    const key = e.valueFrom?.secretKeyRef?.key;
    const who = PRINCIPALS.find((p) => passwordKey(p) === key);
    return [e.name, who ? pw[who] : e.name === 'REDIS_MEMORY_LIMIT' ? String(256 << 20) : (e.value ?? '')];
  }),
);

let dir = '';
let port = 0;
let server: ServerProcess | undefined;

// The bundled Redis's own start script (the StatefulSet's command), run here with a real server:
// only its paths and port are moved into a scratch directory.
async function startRedis(): Promise<ServerProcess> {
  const conf = join(dir, 'redis.conf');
  const script = container.command[2]!.replaceAll('/tmp/redis.conf', conf).replace('dir /data', `dir ${dir}`);
  return retryOnPortClash(async () => {
    port = await freePort();
    const proc = spawnServer({
      name: 'redis',
      command: 'sh',
      args: [
        '-c',
        script.replace(`redis-server ${conf}`, `redis-server ${conf} --port ${port} --bind 127.0.0.1`),
      ],
      dir,
      env: { ...process.env, ...podEnv },
    });
    await waitReady(proc, async () => (await redisServerPid(port, pw.admin)) > 0);
    return proc;
  });
}

beforeAll(async () => {
  dir = makeTempDir('bundled-redis');
  server = await startRedis();
});

afterAll(async () => {
  await server?.stop();
  if (dir) removeDir(dir);
});

/** What the server answers to raw commands on one connection (RESP replies, joined). */
const ask = (...commands: string[][]) =>
  new Promise<string>((resolve, reject) => {
    const sock = createConnection({ host: '127.0.0.1', port }, () =>
      sock.write(commands.map((c) => `${c.join(' ')}\r\n`).join('')),
    );
    let buf = '';
    sock.on('data', (d) => {
      buf += d.toString();
      if (buf.split('\r\n').length > commands.length) sock.end();
    });
    sock.on('close', () => resolve(buf));
    sock.once('error', reject);
  });

describe('the bundled Redis', () => {
  it("refuses its `default` user: no user, the admin's password without a name, or `default` by name", async () => {
    // Before any AUTH a connection is Redis's `default` user: it may not even PING.
    expect(await ask(['PING'])).toMatch(/^-NOAUTH/);
    for (const auth of [
      ['AUTH', pw.admin],
      ['AUTH', 'default', pw.admin],
      ['AUTH', 'default', '""'],
    ]) {
      const reply = await ask(auth, ['PING']);
      expect(reply).toMatch(/^-WRONGPASS/);
      expect(reply).not.toContain('PONG');
    }
    expect(await ask(['AUTH', 'admin', pw.admin], ['PING'])).toBe('+OK\r\n+PONG\r\n');
    const admin = new Redis(redisUrl('admin', pw.admin, '127.0.0.1', port), { maxRetriesPerRequest: 0 });
    expect(await admin.call('acl', 'whoami')).toBe('admin');
    expect((await admin.call('acl', 'getuser', 'default')) as unknown[]).toContainEqual(
      expect.arrayContaining(['off']),
    );
    admin.disconnect();
  });

  it('a restart from its AOF keeps what transactions wrote (a pod killed with its node, issue 29)', async () => {
    // The AOF replay runs as `default` and re-checks each MULTI/EXEC at EXEC: a `default` with no
    // grants dropped every transaction on restart (redis/redis#14541), the whole trail of a Holt.
    const admin = new Redis(redisUrl('admin', pw.admin, '127.0.0.1', port), { maxRetriesPerRequest: 0 });
    await admin.multi().set('holt:demo:tx', 'kept').sadd('holt:demo:set', 'a').exec();
    await admin.set('holt:demo:plain', 'kept');
    // appendfsync everysec may hold the AOF buffer back (up to 2 s while a slow fsync runs) after the
    // reply: a SIGKILL before it reaches the file loses it by design. Kill once it is written.
    await eventually('the AOF buffer written to the file', async () => {
      const info = await admin.info('persistence');
      return /aof_buffer_length:0\r?\n/.test(info) && /aof_pending_bio_fsync:0\r?\n/.test(info)
        ? true
        : undefined;
    });
    admin.disconnect();
    const exited = new Promise((r) => server!.child.once('exit', r));
    server!.child.kill('SIGKILL');
    await exited;
    server = await startRedis();
    const again = new Redis(redisUrl('admin', pw.admin, '127.0.0.1', port), { maxRetriesPerRequest: 0 });
    try {
      expect(await again.get('holt:demo:tx')).toBe('kept');
      expect(await again.smembers('holt:demo:set')).toEqual(['a']);
      expect(await again.get('holt:demo:plain')).toBe('kept');
      // Still no client can be `default`.
      expect(await ask(['PING'])).toMatch(/^-NOAUTH/);
      expect(await ask(['AUTH', 'default', '""'], ['PING'])).toMatch(/^-WRONGPASS/);
    } finally {
      again.disconnect();
    }
  });

  it('its liveness probe (redis-cli as admin with the pod’s REDISCLI_AUTH) gets PONG', () => {
    const [bin, ...args] = container.livenessProbe.exec.command;
    const out = execFileSync(bin!, ['-p', String(port), ...args], { env: { ...process.env, ...podEnv } });
    expect(out.toString().trim()).toBe('PONG');
  });
});
