import { type JaegerSpan, type JaegerTrace, parentSpanId, tagValue } from './jaeger.ts';

/**
 * A trace as a picture: the waterfall of Jaeger's trace view, drawn from the query API's data, because
 * the Jaeger the tests build serves no UI. Pure and deterministic (the same trace gives the same bytes),
 * so a regenerated picture only changes when the trace does. Self-contained SVG: no font, style sheet or
 * script to fetch, so it renders the same on GitHub, in a browser and in an image converter.
 */

export interface TracePictureOptions {
  /** The picture's width in pixels (the rows grow downwards). */
  width?: number;
}

/** One row of the waterfall: a span and how deep it sits in the tree. */
export interface TraceRow {
  span: JaegerSpan;
  depth: number;
}

const ROW = 18;
const INDENT = 12;
const LABEL_W = 360;
const HEADER = 70;
const FONT = 'Helvetica, Arial, sans-serif';
/** Roughly the advance of one character at 11 px in the sans fonts above: used to cut long labels. */
const CHAR_W = 6.1;
// The two services of a Holt keep their colours from picture to picture; others take the rest in name order.
const KNOWN: Record<string, string> = {
  'holt-orchestrator': '#3b82f6',
  'holt-pup': '#14b8a6',
  'holt-operator': '#a855f7',
};
const PALETTE = ['#f59e0b', '#ec4899', '#84cc16', '#6366f1', '#f97316', '#06b6d4'];
const ERROR = '#dc2626';

/** XML's five special characters, so that a span name can never end an attribute or start a tag. */
export function escapeXml(s: string): string {
  return s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

/** A duration in microseconds as Jaeger's view shows it: µs, ms or s, three significant figures at most. */
export function formatDuration(us: number): string {
  if (us < 1000) return `${Math.round(us)}µs`;
  if (us < 1_000_000) return `${+(us / 1000).toPrecision(3)}ms`;
  return `${+(us / 1_000_000).toPrecision(3)}s`;
}

/** Errored as OpenTelemetry says it (status ERROR) or as OpenTracing did (`error` = true). */
export function isError(span: JaegerSpan): boolean {
  const e = tagValue(span, 'error');
  return tagValue(span, 'otel.status_code') === 'ERROR' || e === true || e === 'true';
}

const byStart = (a: JaegerSpan, b: JaegerSpan) =>
  a.startTime - b.startTime ||
  (a.operationName < b.operationName ? -1 : a.operationName > b.operationName ? 1 : 0) ||
  (a.spanID < b.spanID ? -1 : a.spanID > b.spanID ? 1 : 0);

/**
 * The spans in tree order: each under its parent, siblings by start time. A span whose parent is not in
 * the trace (the caller's span, or one not exported) is a root, so every span gets exactly one row.
 */
export function traceRows(trace: JaegerTrace): TraceRow[] {
  const ids = new Set(trace.spans.map((s) => s.spanID));
  const children = new Map<string, JaegerSpan[]>();
  const roots: JaegerSpan[] = [];
  for (const s of trace.spans) {
    const p = parentSpanId(s);
    if (p !== undefined && p !== s.spanID && ids.has(p)) children.set(p, [...(children.get(p) ?? []), s]);
    else roots.push(s);
  }
  const rows: TraceRow[] = [];
  const seen = new Set<string>();
  const visit = (s: JaegerSpan, depth: number) => {
    if (seen.has(s.spanID)) return; // a duplicate id in a broken trace: drawn once
    seen.add(s.spanID);
    rows.push({ span: s, depth });
    for (const c of (children.get(s.spanID) ?? []).sort(byStart)) visit(c, depth + 1);
  };
  for (const r of roots.sort(byStart)) visit(r, 0);
  // A parent cycle has no root: its spans still get rows, at the top level.
  for (const s of [...trace.spans].sort(byStart)) visit(s, 0);
  return rows;
}

/** Tick steps of 1, 2 or 5 times a power of ten, about five over the whole trace. */
function ticks(total: number): number[] {
  if (total <= 0) return [0];
  const rough = total / 5;
  const pow = 10 ** Math.floor(Math.log10(rough));
  const step = ([1, 2, 5, 10].map((m) => m * pow).find((s) => s >= rough) ?? 10 * pow) as number;
  const out: number[] = [];
  for (let t = 0; t <= total + 1e-9; t += step) out.push(t);
  return out;
}

/** A label cut to fit `px` pixels, with an ellipsis when cut. */
function clip(s: string, px: number): string {
  const n = Math.max(1, Math.floor(px / CHAR_W));
  return s.length <= n ? s : `${s.slice(0, n - 1)}…`;
}

const r1 = (n: number) => Math.round(n * 10) / 10;

/** The trace as an SVG waterfall (see the file's comment). */
export function traceSvg(trace: JaegerTrace, opts: TracePictureOptions = {}): string {
  const width = opts.width ?? 1000;
  const rows = traceRows(trace);
  const spans = trace.spans;
  const t0 = spans.length ? Math.min(...spans.map((s) => s.startTime)) : 0;
  const t1 = spans.length ? Math.max(...spans.map((s) => s.startTime + s.duration)) : 0;
  const total = t1 - t0;
  // The bars' area, with room on the right for a duration beside the last bar.
  const x0 = LABEL_W + 10;
  const barW = width - x0 - 60;
  const x = (us: number) => r1(x0 + (total > 0 ? ((us - t0) / total) * barW : 0));
  const services = [...new Set(spans.map((s) => s.process.serviceName))].sort();
  const others = services.filter((s) => !(s in KNOWN));
  const colour = (svc: string) => KNOWN[svc] ?? PALETTE[others.indexOf(svc) % PALETTE.length] ?? '#64748b';
  const height = HEADER + rows.length * ROW + 10;
  const out: string[] = [];
  out.push(
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="${FONT}" font-size="11">`,
    `<rect width="${width}" height="${height}" fill="#ffffff"/>`,
  );
  const head = `Trace ${trace.traceID} · ${spans.length} spans · ${services.length} services · ${formatDuration(total)}`;
  out.push(`<text x="10" y="20" font-size="14" font-weight="bold" fill="#0f172a">${escapeXml(head)}</text>`);
  // The legend names the services: the header line's services, each with its bar colour.
  let lx = 10;
  for (const svc of services) {
    out.push(
      `<rect x="${lx}" y="31" width="10" height="10" rx="2" fill="${colour(svc)}"/>`,
      `<text x="${lx + 14}" y="40" fill="#334155">${escapeXml(svc)}</text>`,
    );
    lx += 24 + svc.length * CHAR_W;
  }
  out.push(
    `<rect x="${r1(lx)}" y="31" width="10" height="10" rx="2" fill="#ffffff" stroke="${ERROR}" stroke-width="1.5"/>`,
    `<text x="${r1(lx + 14)}" y="40" fill="#334155">error</text>`,
  );
  // The time axis: labels above the rows, a faint line down through them at each tick.
  const bottom = HEADER + rows.length * ROW;
  for (const t of ticks(total)) {
    const tx = x(t0 + t);
    const anchor = t === 0 ? 'start' : 'middle';
    out.push(
      `<line x1="${tx}" y1="${HEADER - 6}" x2="${tx}" y2="${bottom}" stroke="#e2e8f0"/>`,
      `<text x="${tx}" y="${HEADER - 10}" text-anchor="${anchor}" fill="#64748b">${t === 0 ? '0' : formatDuration(t)}</text>`,
    );
  }
  out.push(`<line x1="0" y1="${HEADER - 0.5}" x2="${width}" y2="${HEADER - 0.5}" stroke="#cbd5e1"/>`);
  rows.forEach(({ span, depth }, i) => {
    const y = HEADER + i * ROW;
    const svc = span.process.serviceName;
    const err = isError(span);
    const dur = formatDuration(span.duration);
    out.push(`<g><title>${escapeXml(`${span.operationName} (${svc}) ${dur}`)}</title>`);
    // Every other row shaded, so that a label can be followed to its bar across the gap.
    if (i % 2 === 1) out.push(`<rect x="0" y="${y}" width="${width}" height="${ROW}" fill="#f8fafc"/>`);
    const lx = 10 + depth * INDENT;
    const name = clip(span.operationName, LABEL_W - lx - 4);
    const room = LABEL_W - lx - name.length * CHAR_W - 10;
    const service = room > 30 ? clip(svc, room) : '';
    out.push(
      `<text x="${lx}" y="${y + 13}" fill="${err ? ERROR : '#0f172a'}">${escapeXml(name)}` +
        (service ? `<tspan dx="6" fill="#94a3b8" font-size="10">${escapeXml(service)}</tspan>` : '') +
        '</text>',
    );
    const bx = x(span.startTime);
    const bw = Math.max(1, r1((total > 0 ? span.duration / total : 0) * barW));
    const stroke = err ? ` stroke="${ERROR}" stroke-width="1.5"` : '';
    out.push(
      `<rect x="${bx}" y="${y + 4}" width="${bw}" height="10" rx="1.5" fill="${colour(svc)}"${stroke}/>`,
    );
    // The duration beside its bar: on the right, or on the left when the bar reaches the edge.
    const right = bx + bw + 4 + dur.length * CHAR_W <= width - 2;
    out.push(
      `<text x="${right ? r1(bx + bw + 4) : r1(bx - 4)}" y="${y + 13}" text-anchor="${right ? 'start' : 'end'}" fill="#475569" font-size="10">${escapeXml(dur)}</text>`,
    );
    for (const log of span.logs) {
      const ev = log.fields.find((f) => f.key === 'event');
      if (!ev) continue;
      const ex = x(log.timestamp);
      // Taller than the bar, so that a tick still shows on a bar only a pixel or two wide.
      out.push(
        `<line x1="${ex}" y1="${y + 1}" x2="${ex}" y2="${y + 17}" stroke="#0f172a"><title>${escapeXml(String(ev.value))}</title></line>`,
      );
    }
    out.push('</g>');
  });
  out.push('</svg>');
  return `${out.join('\n')}\n`;
}
