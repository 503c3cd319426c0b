import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { KubeConfig } from '@kubernetes/client-node';
import { collectDefaultMetrics, Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { Blackboard } from '../src/blackboard/client.ts';
import { silentLogger } from '../src/common/logger.ts';
import { createPool } from '../src/common/pg.ts';
import { InboxMetrics } from '../src/inbox/metrics.ts';
import { startIngressServer } from '../src/ingress/server.ts';
import { LifeStore } from '../src/life/store.ts';
import { LifeTasks } from '../src/life/tasks.ts';
import { LlmMetrics, MeteredModel } from '../src/llm/model/metrics.ts';
import { OpenAiModel } from '../src/llm/model/model.ts';
import { KubeClient } from '../src/operator/kube/kube.ts';
import { createMetrics } from '../src/operator/kube/metrics.ts';
import { startRetention } from '../src/orchestrator/retention.ts';
import { newGoal, register, ScriptedAgent, startOrchestrator } from '../src/orchestrator/testkit.ts';
import { PupMetrics } from '../src/pup/metrics.ts';
import { startLlmServer, text } from './harness/llm.ts';
import { promlint } from './harness/promlint.ts';
import { type RedisServer, startRedis } from './harness/redis.ts';
import { eventually } from './harness/wait.ts';

// Every metric a Holt program exposes, as it exposes it (with samples), checked by Prometheus's own
// linter and by the label rule promlint does not know: `instance` and `job` belong to Prometheus.

let redis: RedisServer;
beforeAll(async () => {
  redis = await startRedis();
});
afterAll(async () => {
  await redis?.stop();
});

/**
 * prom-client's default Node metrics name three gauges `_total` (nodejs_active_{handles,requests,
 * resources}_total): theirs, kept for every dashboard that reads them. Nothing else is excused.
 */
const PROM_CLIENT_OWN =
  /^nodejs_active_(handles|requests|resources)_total: non-counter metrics should not have "_total" suffix$/;

const DOC = readFileSync(join(import.meta.dirname, '..', 'docs', 'metrics.md'), 'utf8');

/** Every metric family the programs exposed in these tests (the dashboard and alerts may name only these). */
const exposed = new Set<string>();

async function expectClean(registry: Registry): Promise<string> {
  const text = await registry.metrics();
  for (const m of text.matchAll(/^# TYPE (\S+) /gm)) exposed.add(m[1] as string);
  // Every metric of ours is in docs/metrics.md, under its own name.
  const ours = [...text.matchAll(/^# TYPE (holt_\S+) /gm)].map((m) => m[1]);
  expect(ours.filter((n) => !DOC.includes(`\`${n}\``))).toEqual([]);
  expect((await promlint(text)).filter((p) => !PROM_CLIENT_OWN.test(p))).toEqual([]);
  const labels = [...text.matchAll(/[{,]([a-zA-Z_][a-zA-Z0-9_]*)="/g)].map((m) => m[1]);
  expect(labels.filter((l) => l === 'instance' || l === 'job')).toEqual([]);
  return text;
}

describe('metrics follow Prometheus conventions (promlint, real samples)', () => {
  it('the linter itself catches a counter without _total and a gauge in the wrong units', async () => {
    const bad = [
      '# HELP holt_things Things.',
      '# TYPE holt_things counter',
      'holt_things 1',
      '# HELP holt_wait_milliseconds Waits.',
      '# TYPE holt_wait_milliseconds gauge',
      'holt_wait_milliseconds 3',
      '',
    ].join('\n');
    const problems = await promlint(bad);
    expect(problems.some((p) => p.startsWith('holt_things:') && p.includes('_total'))).toBe(true);
    expect(problems.some((p) => p.startsWith('holt_wait_milliseconds:'))).toBe(true);
  });

  it('the orchestrator: claims, grants, bids, inbox depth, retention and process metrics', async () => {
    const I = `m-${randomUUID().slice(0, 8)}`;
    const bb = Blackboard.connect(redis.url, I);
    await register(bb, ['coder']);
    const orch = startOrchestrator(redis.url, I);
    const coder = await ScriptedAgent.start(redis.url, I, {
      role: 'coder',
      bid: (t) => (t.type === 'GoalDefined' ? 'exclusive' : 'ignore'),
      respond: () => ({ type: 'Code', payload: 'x' }),
    });
    const retention = startRetention({
      bb,
      isLeader: () => true,
      log: silentLogger(),
      days: 7,
      sweepMs: 3_600_000,
      registry: orch.metrics.registry,
    });
    try {
      collectDefaultMetrics({ register: orch.metrics.registry });
      new InboxMetrics(orch.metrics.registry).observe([
        { worker_target: 'coder', pending: 2, in_flight: 1, oldest_pending_seconds: 3 },
      ]);
      await bb.createArtefact(newGoal());
      await eventually(
        'a claim finished (its metrics have samples)',
        async () => (await orch.metrics.finished.get()).values.length > 0,
      );
      await retention.pass();
      const text = await expectClean(orch.metrics.registry);
      expect(text).toContain('holt_orchestrator_grants_total{');
      expect(text).toContain('process_cpu_seconds_total');
    } finally {
      retention.stop();
      await coder.stop();
      await orch.stop();
      await bb.close();
    }
  });

  it("the living agents' ingress: requests by code, refusals by reason, open connections", async () => {
    const registry = new Registry();
    let leader = false;
    // No request here reaches the store (refused from its head): a pool that is never connected.
    const pool = createPool('postgres://holt@127.0.0.1:1/none');
    const srv = await startIngressServer({
      instance: 'm',
      port: 0,
      host: '127.0.0.1',
      life: new LifeStore(pool),
      tasks: new LifeTasks(pool),
      tokens: () => [],
      knows: async () => true,
      ring: () => undefined,
      log: silentLogger(),
      serving: () => leader,
      registry,
    });
    try {
      const post = () =>
        fetch(`http://127.0.0.1:${srv.port}/v1/agents/Writer/messages`, { method: 'POST', body: '{}' });
      expect((await post()).status).toBe(503);
      leader = true;
      expect((await post()).status).toBe(401);
      const text = await expectClean(registry);
      expect(text).toContain('holt_ingress_refused_total{reason="standby"} 1');
      expect(text).toContain('holt_ingress_requests_total{code="401"} 1');
      expect(text).toContain('# TYPE holt_ingress_connections gauge');
    } finally {
      await srv.close();
      await pool.end();
    }
  });

  it('the pup and its LLM calls: tokens in and out, cost, latency and errors by class', async () => {
    const llm = await startLlmServer([
      text('hello'),
      { status: 429, body: '{"error":{"message":"slow down"}}' },
    ]);
    try {
      const pup = new PupMetrics({ instance: 'demo', role: 'Coder', mode: 'standard' });
      collectDefaultMetrics({ register: pup.registry });
      pup.bids.inc({ bid_type: 'exclusive', source: 'strategy' });
      pup.toolDuration.observe({ outcome: 'success' }, 0.2);
      const llmMetrics = new LlmMetrics(pup.registry);
      llmMetrics.watchPause({ pausedReason: () => 'calls budget used up' });
      const model = new MeteredModel(
        new OpenAiModel({ baseUrl: llm.url, apiKey: '', model: 'm', timeoutMs: 5_000, maxRetries: 0 }),
        llmMetrics,
        { inputPerMTok: 1, outputPerMTok: 2 },
      );
      await model.chat({ messages: [{ role: 'user', content: 'hi' }] });
      await expect(model.chat({ messages: [{ role: 'user', content: 'again' }] })).rejects.toThrow();
      const text = await expectClean(pup.registry);
      expect(text).toMatch(/holt_llm_tokens_total\{direction="input",holt_instance="demo",role="Coder"/);
      expect(text).toMatch(/holt_llm_errors_total\{class="transient"[^}]*\} 1/); // a 429 rate limit
      expect(text).toMatch(/holt_llm_request_duration_seconds_count\{[^}]*outcome="success"[^}]*\} 1/);
      // 100 prompt and 20 completion tokens (the server's usage) at $1 and $2 per million.
      expect(text).toMatch(/holt_llm_budget_paused\{[^}]*\} 1\n/);
      expect(text).toMatch(/holt_llm_cost_usd_total\{[^}]*\} 0\.00014\n/);
    } finally {
      await llm.close();
    }
  });

  it('the operator: reconciles, queue, API requests (a counter), autoscaler and process metrics', async () => {
    const kc = new KubeConfig();
    kc.loadFromOptions({
      clusters: [{ name: 'c', server: 'https://127.0.0.1:1', skipTLSVerify: true }],
      users: [{ name: 'u' }],
      contexts: [{ name: 'x', cluster: 'c', user: 'u' }],
      currentContext: 'x',
    });
    const client = new KubeClient(kc);
    try {
      await client.get('Secret', 'default', 'nothing-listens').catch(() => undefined);
      const m = createMetrics(client, () => ({ holt: 1 }));
      collectDefaultMetrics({ register: m.registry });
      m.reconciles.inc({ controller: 'holt', result: 'success' });
      m.reconcileSeconds.observe({ controller: 'holt' }, 0.01);
      m.autoscalerDecisions.inc({ reason: 'target' });
      m.poolBacklog.set({ namespace: 'ns', pool: 'p' }, 3);
      const text = await expectClean(m.registry);
      expect(text).toContain('# TYPE holt_operator_api_requests_total counter');
    } finally {
      client.close();
    }
  });

  it("the chart's dashboard and alerts query only metrics the programs expose (run after the three above)", () => {
    const chart = join(import.meta.dirname, '..', 'charts', 'holt-operator', 'files');
    const dashboard = JSON.parse(readFileSync(join(chart, 'dashboard.json'), 'utf8')) as {
      panels: { title: string; targets: { expr: string }[] }[];
    };
    const alerts = parseYaml(readFileSync(join(chart, 'alerts.yaml'), 'utf8')) as {
      groups: { rules: { alert: string; expr: string }[] }[];
    };
    const queries = [
      ...dashboard.panels.flatMap((p) => p.targets.map((t) => ({ where: p.title, expr: t.expr }))),
      ...alerts.groups.flatMap((g) => g.rules.map((r) => ({ where: r.alert, expr: r.expr }))),
    ];
    expect(queries.length).toBeGreaterThan(10);
    expect(exposed.size).toBeGreaterThan(30);
    const missing: string[] = [];
    // Label matchers and grouping clauses name labels, not metrics: drop them first.
    for (const q of queries)
      for (const m of q.expr
        .replace(/\{[^}]*\}/g, '')
        .replace(/\b(by|without|on|ignoring)\s*\([^)]*\)/g, '')
        .matchAll(/\b((?:holt|process|nodejs)_[a-z0-9_]+)/g)) {
        const name = (m[1] as string).replace(/_(bucket|count|sum)$/, '');
        if (!exposed.has(name)) missing.push(`${q.where}: ${m[1]}`);
      }
    expect(missing).toEqual([]);
    // The panels the dashboard promises.
    expect(dashboard.panels.map((p) => p.title)).toEqual(
      expect.arrayContaining([
        'Claims by status',
        'Inbox depth',
        'Worker replicas',
        'LLM tokens',
        'Operator reconcile errors',
      ]),
    );
  });
});
