import { spawn } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startNats } from '../../test/harness/nats.ts';
import { freePort } from '../../test/harness/ports.ts';
import { startPostgres } from '../../test/harness/postgres.ts';
import { type RedisServer, startRedis } from '../../test/harness/redis.ts';
import { eventually } from '../../test/harness/wait.ts';
import { ConfigError } from '../common/config.ts';
import { DEFAULTS, loadConfig } from './config.ts';

const base = { HOLT_INSTANCE_NAME: 'demo', REDIS_URL: 'redis://127.0.0.1:6379' };

describe('orchestrator configuration', () => {
  it('reads env with defaults (bid timeout 30 s, max review iterations 3, health port 8080)', () => {
    const c = loadConfig(base);
    expect(c).toMatchObject({
      instance: 'demo',
      bidTimeoutMs: 30_000,
      maxReviewIterations: 3,
      healthPort: 8080,
    });
    expect(c.reconcileIntervalMs).toBe(DEFAULTS.reconcileIntervalMs);
    expect(c.redispatchAfterMs).toBe(30_000);
    expect(loadConfig({ ...base, HOLT_REDISPATCH_AFTER_MS: '5000' }).redispatchAfterMs).toBe(5000);
    expect(() => loadConfig({ ...base, HOLT_REDISPATCH_AFTER_MS: '0' })).toThrow(ConfigError);
    expect(loadConfig(base).loadIntervalMs).toBe(2000);
    expect(loadConfig({ ...base, HOLT_LOAD_INTERVAL_MS: '500' }).loadIntervalMs).toBe(500);
    expect(() => loadConfig({ ...base, HOLT_LOAD_INTERVAL_MS: 'soon' })).toThrow(ConfigError);
    expect(
      loadConfig({
        ...base,
        HOLT_BID_TIMEOUT_MS: '250',
        HOLT_MAX_REVIEW_ITERATIONS: '0',
        HOLT_HEALTH_PORT: '',
      }),
    ).toMatchObject({
      bidTimeoutMs: 250,
      maxReviewIterations: 0,
      healthPort: 8080,
    });
  });

  it('the maximum bid window: 4 × the bid timeout by default, set by env or file, never below the timeout', () => {
    expect(loadConfig(base).maxBidTimeoutMs).toBe(120_000);
    expect(loadConfig({ ...base, HOLT_BID_TIMEOUT_MS: '250' }).maxBidTimeoutMs).toBe(1000);
    expect(loadConfig({ ...base, HOLT_MAX_BID_TIMEOUT_MS: '45000' }).maxBidTimeoutMs).toBe(45_000);
    // Equal to the timeout: no bidder is ever waited for longer (the adaptation is off).
    expect(loadConfig({ ...base, HOLT_MAX_BID_TIMEOUT_MS: '30000' }).maxBidTimeoutMs).toBe(30_000);
    expect(() => loadConfig({ ...base, HOLT_MAX_BID_TIMEOUT_MS: '29999' })).toThrow(
      /at least the bid timeout/,
    );
    expect(() => loadConfig({ ...base, HOLT_MAX_BID_TIMEOUT_MS: 'long' })).toThrow(ConfigError);
    const dir = mkdtempSync(join(tmpdir(), 'orch-cfg-'));
    const yml = join(dir, 'o.yaml');
    writeFileSync(yml, 'bid_timeout_ms: 500\nmax_bid_timeout_ms: 900\n');
    expect(loadConfig({ ...base, HOLT_ORCHESTRATOR_CONFIG: yml })).toMatchObject({
      bidTimeoutMs: 500,
      maxBidTimeoutMs: 900,
    });
  });

  it('merges a YAML or JSON config file under the environment', () => {
    const dir = mkdtempSync(join(tmpdir(), 'orch-cfg-'));
    const yml = join(dir, 'o.yaml');
    writeFileSync(yml, 'bid_timeout_ms: 500\nmax_review_iterations: 5\nreconcile_interval_ms: 2000\n');
    expect(
      loadConfig({ ...base, HOLT_ORCHESTRATOR_CONFIG: yml, HOLT_MAX_REVIEW_ITERATIONS: '1' }),
    ).toMatchObject({
      bidTimeoutMs: 500,
      maxReviewIterations: 1,
      reconcileIntervalMs: 2000,
    });
    const json = join(dir, 'o.json');
    writeFileSync(json, JSON.stringify({ instance: 'fromfile', redis_url: 'redis://h:1' }));
    expect(loadConfig({ HOLT_ORCHESTRATOR_CONFIG: json })).toMatchObject({
      instance: 'fromfile',
      redisUrl: 'redis://h:1',
    });
    writeFileSync(yml, 'bid_timout_ms: 5\n');
    expect(() => loadConfig({ ...base, HOLT_ORCHESTRATOR_CONFIG: yml })).toThrow(/Unrecognized key/);
  });

  it('bad configuration is a one-line ConfigError naming the setting', () => {
    expect(() => loadConfig({ REDIS_URL: 'redis://x' })).toThrow(
      new ConfigError('HOLT_INSTANCE_NAME: required'),
    );
    expect(() => loadConfig({ ...base, HOLT_BID_TIMEOUT_MS: 'soon' })).toThrow(/HOLT_BID_TIMEOUT_MS/);
    expect(() => loadConfig({ ...base, REDIS_URL: 'http://x' })).toThrow(/REDIS_URL/);
    expect(() => loadConfig({ ...base, HOLT_ORCHESTRATOR_CONFIG: '/nonexistent.yaml' })).toThrow(
      /cannot read/,
    );
  });
});

describe('holt orchestrator process', () => {
  let redis: RedisServer;
  beforeAll(async () => {
    redis = await startRedis();
  });
  afterAll(async () => {
    await redis?.stop();
  });
  const main = join(import.meta.dirname, 'main.ts');

  it('exits 78 (EX_CONFIG) with one line on bad configuration', async () => {
    const p = spawn(process.execPath, [main], { env: { PATH: process.env.PATH, REDIS_URL: 'redis://x' } });
    let err = '';
    p.stderr.on('data', (d) => {
      err += String(d);
    });
    const code = await new Promise<number | null>((r) => p.on('exit', r));
    expect(code).toBe(78);
    expect(err).toBe('holt orchestrator: HOLT_INSTANCE_NAME: required\n');
  });

  it('serves /healthz and /metrics, and exits 0 on SIGTERM', async () => {
    const port = await freePort();
    const p = spawn(process.execPath, [main], {
      env: {
        PATH: process.env.PATH,
        HOLT_INSTANCE_NAME: 'proc',
        REDIS_URL: redis.url,
        HOLT_HEALTH_PORT: String(port),
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    p.stdout.on('data', (d) => {
      out += String(d);
    });
    const health = await eventually('/healthz', () =>
      fetch(`http://127.0.0.1:${port}/healthz`).then(
        (r) => r.status === 200 && r.json(),
        () => null,
      ),
    );
    expect(health).toEqual({ status: 'healthy', redis: 'connected' });
    await eventually('recovery_complete log', () => out.includes('"event_type":"recovery_complete"'));
    const metrics = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
    expect(metrics).toContain('holt_orchestrator_claims{status="pending_review"}');
    expect(metrics).toContain('holt_orchestrator_leader 1');
    expect(metrics).toContain('holt_orchestrator_bid_latency_seconds');
    p.kill('SIGTERM');
    const code = await new Promise<number | null>((r) => p.on('exit', r));
    expect(code).toBe(0);
    const line = JSON.parse(out.split('\n').find((l) => l.includes('lease_acquired')) as string);
    expect(line).toMatchObject({
      component: 'orchestrator',
      instance: 'proc',
      level: 'info',
      event_type: 'lease_acquired',
    });
    expect(typeof line.timestamp).toBe('string');
  });

  it('/healthz is 503 once the NATS connection is closed for good (auth refused twice), so the pod restarts', async () => {
    const [pgs, natsPort] = await Promise.all([startPostgres(), freePort()]);
    let nats = await startNats({ port: natsPort, auth: { user: 'holt', pass: 'first' } });
    const port = await freePort();
    const p = spawn(process.execPath, [main], {
      env: {
        PATH: process.env.PATH,
        HOLT_INSTANCE_NAME: 'bus',
        REDIS_URL: redis.url,
        DATABASE_URL: pgs.url,
        NATS_URL: nats.url,
        HOLT_HEALTH_PORT: String(port),
      },
      stdio: 'ignore',
    });
    const healthz = () =>
      fetch(`http://127.0.0.1:${port}/healthz`).then(
        async (r) => ({ status: r.status, body: (await r.json()) as Record<string, unknown> }),
        () => null,
      );
    try {
      await eventually('healthy with NATS', async () => (await healthz())?.status === 200);
      // The server comes back with another password: nats.js gives up after the same auth error twice.
      await nats.stop();
      nats = await startNats({ port: natsPort, auth: { user: 'holt', pass: 'second' } });
      const down = await eventually('/healthz 503', async () => {
        const h = await healthz();
        return h?.status === 503 ? h : null;
      });
      expect(down.body).toMatchObject({ status: 'unhealthy', nats: 'closed', redis: 'connected' });
    } finally {
      p.kill('SIGTERM');
      await new Promise((r) => p.on('exit', r));
      await Promise.all([nats.stop(), pgs.stop()]);
    }
  });

  it('/healthz is 503 when Redis is down', async () => {
    const port = await freePort();
    const deadPort = await freePort();
    const p = spawn(process.execPath, [main], {
      env: {
        PATH: process.env.PATH,
        HOLT_INSTANCE_NAME: 'proc',
        REDIS_URL: `redis://127.0.0.1:${deadPort}`,
        HOLT_HEALTH_PORT: String(port),
      },
      stdio: 'ignore',
    });
    const res = await eventually('/healthz', () =>
      fetch(`http://127.0.0.1:${port}/healthz`).then(
        (r) => r,
        () => null,
      ),
    );
    expect(res.status).toBe(503);
    expect(await res.json()).toMatchObject({ status: 'unhealthy', redis: 'disconnected' });
    p.kill('SIGTERM');
    await new Promise((r) => p.on('exit', r));
  });
});
