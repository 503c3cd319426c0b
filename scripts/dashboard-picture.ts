// Renders the dashboard's panels from real figures as one SVG (the README's picture):
//   HOLT_DASHBOARD_OUT=/tmp/dash.json npx vitest run e2e/cluster.test.ts   # the real cluster, scraped
//   node scripts/dashboard-picture.ts /tmp/dash.json docs/dashboard.svg
// The figures are the range queries of charts/holt-operator/files/dashboard.json over the run's last
// 15 minutes, answered by the Prometheus that scraped the cluster's pods. No Grafana is involved:
// each panel is drawn as a plain line chart of the same series.
import { readFileSync, writeFileSync } from 'node:fs';
import { z } from 'zod';

const Figures = z.object({
  taken_at: z.string(),
  panels: z.array(
    z.object({
      title: z.string(),
      series: z.array(z.object({ legend: z.string(), values: z.array(z.tuple([z.number(), z.string()])) })),
    }),
  ),
});

const [input, output] = process.argv.slice(2);
if (!input || !output) {
  process.stderr.write('usage: node scripts/dashboard-picture.ts <figures.json> <out.svg>\n');
  process.exit(2);
}
const figures = Figures.parse(JSON.parse(readFileSync(input, 'utf8')));

const COLOURS = ['#7eb26d', '#eab839', '#6ed0e0', '#ef843c', '#e24d42', '#1f78c1', '#ba43a9', '#705da0'];
const W = 560;
const H = 230;
const PAD = { left: 56, right: 12, top: 30, bottom: 46 };
const COLS = 2;
const esc = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
const fmt = (v: number) =>
  v === 0
    ? '0'
    : Math.abs(v) >= 1000 || Math.abs(v) < 0.01
      ? v.toExponential(1)
      : String(Number(v.toPrecision(3)));

function panel(p: z.infer<typeof Figures>['panels'][number], x0: number, y0: number): string {
  const pts = p.series.map((s) => ({
    legend: s.legend,
    points: s.values.map(([t, v]) => [t, Number(v)] as const).filter(([, v]) => Number.isFinite(v)),
  }));
  const all = pts.flatMap((s) => s.points);
  const tMin = Math.min(...all.map(([t]) => t));
  const tMax = Math.max(...all.map(([t]) => t));
  const vMax = Math.max(0, ...all.map(([, v]) => v)) || 1;
  const plotW = W - PAD.left - PAD.right;
  const plotH = H - PAD.top - PAD.bottom;
  const sx = (t: number) => x0 + PAD.left + (tMax > tMin ? ((t - tMin) / (tMax - tMin)) * plotW : plotW / 2);
  const sy = (v: number) => y0 + PAD.top + plotH - (v / vMax) * plotH;
  const out = [
    `<rect x="${x0 + 4}" y="${y0 + 4}" width="${W - 8}" height="${H - 8}" rx="4" fill="#181b1f" stroke="#2c3235"/>`,
    `<text x="${x0 + 14}" y="${y0 + 22}" fill="#d8d9da" font-size="13" font-weight="600">${esc(p.title)}</text>`,
  ];
  for (const f of [0, 0.5, 1]) {
    const y = sy(vMax * f);
    out.push(
      `<line x1="${x0 + PAD.left}" x2="${x0 + W - PAD.right}" y1="${y}" y2="${y}" stroke="#2c3235"/>`,
      `<text x="${x0 + PAD.left - 6}" y="${y + 4}" fill="#8e8e8e" font-size="10" text-anchor="end">${fmt(vMax * f)}</text>`,
    );
  }
  if (!all.length)
    out.push(
      `<text x="${x0 + W / 2}" y="${y0 + H / 2}" fill="#8e8e8e" font-size="12" text-anchor="middle">no data</text>`,
    );
  pts.slice(0, COLOURS.length).forEach((s, i) => {
    const colour = COLOURS[i] as string;
    if (s.points.length > 1)
      out.push(
        `<polyline fill="none" stroke="${colour}" stroke-width="1.5" points="${s.points.map(([t, v]) => `${sx(t).toFixed(1)},${sy(v).toFixed(1)}`).join(' ')}"/>`,
      );
    else if (s.points.length === 1) {
      const [t, v] = s.points[0] as readonly [number, number];
      out.push(`<circle cx="${sx(t)}" cy="${sy(v)}" r="2.5" fill="${colour}"/>`);
    }
    const lx = x0 + PAD.left + (i % 3) * 165;
    const ly = y0 + H - 28 + Math.floor(i / 3) * 13;
    out.push(
      `<rect x="${lx}" y="${ly - 8}" width="10" height="3" fill="${colour}"/>`,
      `<text x="${lx + 14}" y="${ly - 4}" fill="#c7d0d9" font-size="10">${esc(s.legend.slice(0, 24))}</text>`,
    );
  });
  return out.join('\n');
}

const rows = Math.ceil(figures.panels.length / COLS);
const body = figures.panels.map((p, i) => panel(p, (i % COLS) * W, 36 + Math.floor(i / COLS) * H)).join('\n');
const svg = `<svg xmlns="http://www.w3.org/2000/svg" width="${COLS * W}" height="${36 + rows * H}" font-family="Inter, Helvetica, Arial, sans-serif">
<rect width="100%" height="100%" fill="#111217"/>
<text x="14" y="24" fill="#d8d9da" font-size="15" font-weight="600">Holt — charts/holt-operator/files/dashboard.json, from the real test cluster (${esc(figures.taken_at.slice(0, 16).replace('T', ' '))} UTC, last 15 min)</text>
${body}
</svg>
`;
writeFileSync(output, svg);
process.stdout.write(
  `${output}: ${figures.panels.length} panels, ${figures.panels.reduce((n, p) => n + p.series.length, 0)} series\n`,
);
