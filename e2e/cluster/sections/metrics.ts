import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { eventually } from '../../../test/harness/wait.ts';
import { MONITORING_NS, type PromVector, prometheusApi } from '../../prometheus.ts';
import { CLUSTER_WAIT, c, getOnNode, holt, progress, ROOT } from '../ctx.ts';
import { notApplicable } from '../not-applicable.ts';

/** The real cluster: metrics scraped by a real Prometheus. */
export function metricsTests(): void {
  // Concurrent: it runs beside the cli section's tests, which read the same Holts and change nothing it checks.
  it.concurrent('metrics, for real: an in-cluster Prometheus scrapes the Holts and the operator by their scrape hints; every dashboard panel has data, every alert evaluates', async (ctx) => {
    if (!c.local)
      return notApplicable(
        ctx,
        "the Prometheus image is loaded only on the project's own cluster (make cluster-up)",
      );
    // Asked from inside a node's network namespace (where pod addresses route), as another pod would.
    const promPod = JSON.parse(
      await c.kubectl(['-n', MONITORING_NS, 'get', 'pods', '-l', 'app=prometheus', '-o', 'json']),
    ) as { items: { status: { podIP?: string } }[] };
    const ip = promPod.items[0]?.status.podIP;
    expect(ip).toBeTruthy();
    const query = async (q: string, path = 'query', extra: Record<string, string> = {}) => {
      const url = `http://${ip}:9090${prometheusApi(path, { query: q, ...extra })}`;
      const stdout = await getOnNode(url);
      const r = JSON.parse(stdout) as PromVector;
      expect(r.status, q).toBe('success');
      return r.data.result;
    };
    // The Holts' orchestrators and pups, and the operator, found and scraped through their annotations.
    const holts = await eventually(
      'the Holts and the operator scraped',
      async () => {
        const up = await query('count by (holt_io_instance, namespace) (up == 1)');
        const found = up.map((r) => r.metric.holt_io_instance ?? `ns:${r.metric.namespace}`);
        return ['demo', 'scale', 'demo-llm', 'ns:holt-system'].every((h) => found.includes(h))
          ? found
          : undefined;
      },
      CLUSTER_WAIT,
    );
    progress(`scraped: ${holts.join(', ')}`);
    // Over the whole run: a pup restarted by an earlier section (a frozen or killed one) starts its
    // counters again, and has no series until it bids once more.
    const roles = (await query('count by (holt_io_role) (last_over_time(holt_pup_bids_total[1h]))')).map(
      (r) => r.metric.holt_io_role,
    );
    expect(roles).toEqual(expect.arrayContaining(['Drafter', 'Reviewer']));
    const files = join(ROOT, 'charts', 'holt-operator', 'files');
    const dashboard = JSON.parse(readFileSync(join(files, 'dashboard.json'), 'utf8')) as {
      panels: { title: string; targets: { expr: string; legendFormat: string }[] }[];
    };
    const ns = (expr: string) => expr.replaceAll('$namespace', '.+');
    // Rates need two scrapes after the work: asked again until every panel has data.
    let empty: string[] = [];
    await eventually(
      'every dashboard panel to have data',
      async () => {
        empty = [];
        for (const p of dashboard.panels) {
          const results = await Promise.all(p.targets.map((t) => query(ns(t.expr))));
          if (!results.some((r) => r.length > 0)) empty.push(p.title);
        }
        return empty.length ? undefined : true;
      },
      { ...CLUSTER_WAIT, timeoutMs: 120_000 },
    ).catch(async (e: unknown) => {
      const seen = await query('count by (pod, __name__) ({__name__=~"holt_llm.*"})');
      progress(`empty panels: ${empty.join(', ')}; LLM series: ${JSON.stringify(seen.map((r) => r.metric))}`);
      throw e;
    });
    const alerts = parseAllDocuments(readFileSync(join(files, 'alerts.yaml'), 'utf8'))[0]?.toJS() as {
      groups: { rules: { alert: string; expr: string }[] }[];
    };
    for (const r of alerts.groups.flatMap((g) => g.rules)) await query(r.expr);
    // The figures behind the README's dashboard picture (scripts/dashboard-picture.ts renders them).
    const out = process.env.HOLT_DASHBOARD_OUT;
    if (out) {
      // A picture wants work spread over scrapes: four more LLM workflows and worker goals, 30 s apart.
      for (let i = 1; i <= 4; i++) {
        await holt('demo-llm', ['forage', '--goal', `Plan a CHANGELOG, take ${i}`, '--watch']);
        for (let g = 0; g < 3; g++) await holt('scale', ['forage', '--goal', `sleep ${i}.${g}`]);
        await new Promise((r) => setTimeout(r, 30_000));
      }
      const end = Math.floor(Date.now() / 1000);
      const range = { start: String(end - 900), end: String(end), step: '15' };
      const panels = [];
      for (const p of dashboard.panels)
        panels.push({
          title: p.title,
          series: (
            await Promise.all(
              p.targets.map(async (t) => ({ t, r: await query(ns(t.expr), 'query_range', range) })),
            )
          ).flatMap(({ t, r }) =>
            r.map((x) => ({
              legend: t.legendFormat.replace(/\{\{(\w+)\}\}/g, (_, k: string) => x.metric[k] ?? ''),
              values: x.values ?? [],
            })),
          ),
        });
      writeFileSync(out, `${JSON.stringify({ taken_at: new Date().toISOString(), panels })}\n`);
      progress(`dashboard figures written to ${out}`);
    }
  }, 900_000);
}
