import type { StructuralType } from '../blackboard/types.ts';

/** The <svg> element of Graphviz's output, without its XML prologue and doctype. */
export function inlineSvg(svg: string): string {
  const at = svg.indexOf('<svg');
  return at >= 0 ? svg.slice(at) : svg;
}

const LEGEND: [StructuralType | 'rejected' | 'in progress', string][] = [
  ['Standard', 'background:#dbeafe'],
  ['Review', 'background:#dcfce7'],
  ['rejected', 'background:#fee2e2'],
  ['Question', 'background:#fef9c3'],
  ['Answer', 'background:#e0e7ff'],
  ['Failure', 'background:#fecaca'],
  ['Terminal', 'background:#d1fae5'],
  ['in progress', 'border:3px solid #ea580c'],
];

/** Text as HTML text (or a double-quoted attribute): nothing in it can open a tag or an entity. */
export const escapeHtml = (s: string) =>
  s.replaceAll('&', '&amp;').replaceAll('<', '&lt;').replaceAll('>', '&gt;').replaceAll('"', '&quot;');

/**
 * A self-contained page (no external script, style or font) showing the graph. `live`: it listens on
 * `events` (server-sent events from `holt graph -o html --serve`) and swaps in each new picture.
 */
export function graphPage(svg: string, title: string, live: boolean): string {
  const legend = LEGEND.map(([k, style]) => `<span class="key" style="${style}">${k}</span>`).join('');
  const script = live
    ? `<script>
const status = document.getElementById('status');
const events = new EventSource('events');
events.addEventListener('graph', (e) => {
  const g = JSON.parse(e.data);
  document.getElementById('graph').innerHTML = g.svg;
  document.body.dataset.artefacts = g.artefacts;
  status.textContent = 'live: ' + g.artefacts + ' artefacts, updated ' + new Date(g.at).toLocaleTimeString();
});
events.onerror = () => { status.textContent = 'disconnected: retrying'; };
</script>`
    : '';
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>${escapeHtml(title)}</title>
<style>
body { font-family: Helvetica, Arial, sans-serif; margin: 1rem; color: #0f172a; }
header { display: flex; gap: 1rem; align-items: baseline; flex-wrap: wrap; }
h1 { font-size: 1.1rem; margin: 0; }
#status { color: #475569; font-size: .85rem; }
.key { display: inline-block; padding: .1rem .4rem; margin-right: .3rem; border-radius: .3rem; font-size: .75rem; border: 1px solid #cbd5e1; }
#graph svg { max-width: 100%; height: auto; }
</style>
</head>
<body data-artefacts="">
<header><h1>${escapeHtml(title)}</h1><span id="status">${live ? 'connecting' : 'snapshot'}</span><span>${legend}</span></header>
<main id="graph">${inlineSvg(svg)}</main>
${script}
</body>
</html>
`;
}
