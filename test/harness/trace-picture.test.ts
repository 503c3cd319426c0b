import { describe, expect, it } from 'vitest';
import type { JaegerSpan, JaegerTrace } from './jaeger.ts';
import { formatDuration, traceSvg } from './trace-picture.ts';

const TRACE = '0af7651916cd43dd8448eb211c80319c';
const CALLER = 'c0ffee00c0ffee00';

function span(
  id: string,
  name: string,
  service: string,
  parent: string | undefined,
  startTime: number,
  duration: number,
  extra: Partial<JaegerSpan> = {},
): JaegerSpan {
  return {
    traceID: TRACE,
    spanID: id,
    operationName: name,
    references: parent ? [{ refType: 'CHILD_OF', traceID: TRACE, spanID: parent }] : [],
    startTime,
    duration,
    tags: [],
    logs: [],
    process: { serviceName: service, tags: [] },
    ...extra,
  };
}

// Given out of order, as Jaeger may: the picture must sort them into the tree itself.
const SPANS = [
  span('d', 'invoke_agent Drafter', 'holt-pup', 'b', 1350, 100),
  span('b', 'bid <Drafter> & "Co"', 'holt-pup', 'a', 1300, 200),
  // Its parent is the caller's span, not in the trace: a root all the same.
  span('a', 'workflow', 'holt-orchestrator', CALLER, 1000, 1000, {
    logs: [{ timestamp: 1500, fields: [{ key: 'event', value: 'review_rejected' }] }],
  }),
  span('c', 'orchestrator step', 'holt-orchestrator', 'a', 1100, 100, {
    tags: [{ key: 'otel.status_code', type: 'string', value: 'ERROR' }],
  }),
  span('e', 'goal', 'holt-pup', undefined, 950, 50),
];
const trace: JaegerTrace = { traceID: TRACE, spans: SPANS, warnings: [] };

/** Each row's group: its title (the full name), the label's x, and the bar's x, width and stroke. */
function rows(svg: string) {
  return svg
    .split('<g><title>')
    .slice(1)
    .map((g) => ({
      title: g.slice(0, g.indexOf('</title>')),
      labelX: Number(/<text x="([\d.]+)"/.exec(g)?.[1]),
      bar: /<rect x="([\d.]+)" y="[\d.]+" width="([\d.]+)" height="10"([^>]*)\/>/.exec(g),
      ticks: [...g.matchAll(/<line [^>]*><title>([^<]*)<\/title><\/line>/g)].map((m) => m[1]),
    }));
}

/**
 * What makes a text not well-formed XML, as far as this renderer could get it wrong: a tag that is not
 * `<name attr="value" …>`, an `&` that starts no entity, a `<` or `>` in text or in a value, a close tag
 * that does not match, more than one root element.
 */
function xmlProblems(xml: string): string[] {
  const found: string[] = [];
  const stack: string[] = [];
  let roots = 0;
  const badAmp = /&(?!(?:#\d+|#x[0-9a-fA-F]+|amp|lt|gt|quot|apos);)/;
  for (const [i, tok] of xml.split(/(<[^<>]*>)/).entries()) {
    if (i % 2 === 0) {
      if (/[<>]/.test(tok) || badAmp.test(tok)) found.push(`bad text: ${tok}`);
      else if (stack.length === 0 && tok.trim()) found.push(`text outside the root: ${tok}`);
      continue;
    }
    const m = /^<(\/?)([A-Za-z][\w:.-]*)((?:\s+[\w:.-]+="[^"<>]*")*)\s*(\/?)>$/.exec(tok);
    if (!m || badAmp.test(tok)) {
      found.push(`bad tag: ${tok}`);
      continue;
    }
    const [, close, name, , selfClose] = m;
    if (close) {
      if (stack.pop() !== name) found.push(`unmatched </${name}>`);
    } else {
      if (stack.length === 0) roots++;
      if (!selfClose) stack.push(name as string);
    }
  }
  if (stack.length) found.push(`unclosed: ${stack.join(' ')}`);
  if (roots !== 1) found.push(`${roots} root elements`);
  return found;
}

describe('traceSvg: a trace as a waterfall', () => {
  const svg = traceSvg(trace);
  const drawn = rows(svg);

  it('the well-formedness check itself catches what a missing escape would leave', () => {
    expect(xmlProblems('<svg><text x="1">a &amp; b</text></svg>')).toEqual([]);
    expect(xmlProblems('<svg><text>bid <Drafter> & "Co"</text></svg>')).not.toEqual([]);
    expect(xmlProblems('<svg><text>a & b</text></svg>')).not.toEqual([]);
    expect(xmlProblems('<svg><g></svg>')).not.toEqual([]);
    expect(xmlProblems('<svg/><svg/>')).not.toEqual([]);
  });

  it('is well-formed XML with the names escaped', () => {
    expect(xmlProblems(svg)).toEqual([]);
    expect(svg).toContain('bid &#60;Drafter&#62; &#38; &#34;Co&#34;');
    expect(svg).not.toContain('<Drafter>');
    expect(svg.startsWith('<svg xmlns="http://www.w3.org/2000/svg"')).toBe(true);
  });

  it('one row per span in tree order, roots (the orphan too) by start, children under their parent', () => {
    expect(drawn.map((r) => r.title.split(' (')[0])).toEqual([
      'goal',
      'workflow',
      'orchestrator step',
      'bid &#60;Drafter&#62; &#38; &#34;Co&#34;',
      'invoke_agent Drafter',
    ]);
  });

  it('indents each row by its depth', () => {
    const [goal, workflow, step, bid, invoke] = drawn.map((r) => r.labelX);
    expect(goal).toBe(workflow);
    expect(step).toBeGreaterThan(workflow!);
    expect(bid).toBe(step);
    expect(invoke).toBeGreaterThan(bid!);
  });

  it('bars on one time axis: a child inside its parent, the earliest at the left edge', () => {
    const bars = drawn.map((r) => ({ x: Number(r.bar?.[1]), w: Number(r.bar?.[2]) }));
    const [goal, workflow, , bid, invoke] = bars;
    expect(goal!.x).toBeLessThan(workflow!.x);
    expect(invoke!.x).toBeGreaterThanOrEqual(bid!.x);
    expect(invoke!.x + invoke!.w).toBeLessThanOrEqual(bid!.x + bid!.w);
    // The workflow lasts 1000 of the trace's 1050 µs.
    expect(workflow!.w / (goal!.w * 20)).toBeCloseTo(1, 1);
  });

  it('outlines only the error span in red, and marks the event on its span', () => {
    const strokes = drawn.map((r) => /stroke="([^"]+)"/.exec(r.bar?.[3] ?? '')?.[1]);
    expect(strokes).toEqual([undefined, undefined, '#dc2626', undefined, undefined]);
    expect(drawn.map((r) => r.ticks)).toEqual([[], ['review_rejected'], [], [], []]);
  });

  it('a header with the trace id, span count, services and total; durations beside the bars', () => {
    expect(svg).toContain(`Trace ${TRACE} · 5 spans · 2 services · 1.05ms`);
    expect(svg).toMatch(/>holt-orchestrator<\/text>[\s\S]*>holt-pup<\/text>/);
    expect(drawn.map((r) => r.title)).toContain('workflow (holt-orchestrator) 1ms');
    expect(svg).toContain('>1ms</text>');
  });

  it('the same picture for the same trace, whatever order its spans come in', () => {
    const reversed = { ...trace, spans: [...SPANS].reverse() };
    expect(traceSvg(reversed)).toBe(svg);
  });

  it('formats durations as Jaeger does', () => {
    expect([420, 18_260, 1_211_000].map(formatDuration)).toEqual(['420µs', '18.3ms', '1.21s']);
  });
});
