import type { StructuralType } from '../blackboard/types.ts';
import type { ArtefactGraph, GraphEdge, GraphNode } from './model.ts';

/** Fill colour by structural type; a Review by its verdict. */
const FILL: Record<StructuralType, string> = {
  Standard: '#dbeafe',
  Review: '#dcfce7',
  Question: '#fef9c3',
  Answer: '#e0e7ff',
  Failure: '#fecaca',
  Terminal: '#d1fae5',
};
const REJECTED = '#fee2e2';
const ACTIVE = '#ea580c';

export function fillOf(n: GraphNode): string {
  return n.verdict === 'rejected' ? REJECTED : FILL[n.structural];
}

/** The lines of a node's label: type and version, producer and short id, the grant in progress. */
export function labelLines(n: GraphNode): string[] {
  const lines = [`${n.type}${n.version > 1 ? ` v${n.version}` : ''}`, `${n.producer} · ${n.id.slice(0, 8)}`];
  if (n.verdict) lines.push(n.verdict === 'approved' ? '✓ approved' : '✗ changes asked');
  if (n.active) lines.push(`▶ ${n.claim?.grantees.join(', ')} (${n.claim?.status.replace('pending_', '')})`);
  return lines;
}

/** One line of text inside a DOT string: backslashes and quotes escaped, line breaks flattened. */
const dotText = (s: string) =>
  s
    .replaceAll('\\', '\\\\')
    .replaceAll('"', '\\"')
    .replace(/[\r\n]+/g, ' ');
const dotString = (s: string) => `"${dotText(s)}"`;
/** Lines joined with DOT's own line break escape. */
const dotLines = (lines: string[]) => `"${lines.map(dotText).join('\\n')}"`;

/** Graphviz DOT, left to right. */
export function toDot(g: ArtefactGraph, title = 'Holt workflow'): string {
  const out = [
    `digraph ${dotString(title)} {`,
    '  rankdir=LR;',
    '  node [shape=box, style="rounded,filled", fontname="Helvetica", fontsize=11, color="#475569"];',
    '  edge [color="#64748b", fontname="Helvetica", fontsize=10];',
  ];
  for (const n of g.nodes) {
    const attrs = [
      `label=${dotLines(labelLines(n))}`,
      `fillcolor=${dotString(fillOf(n))}`,
      `tooltip=${dotString(n.id)}`,
    ];
    if (n.structural === 'Terminal') attrs.push('peripheries=2');
    if (n.structural === 'Failure') attrs.push('color="#b91c1c"');
    if (n.active) attrs.push(`color=${dotString(ACTIVE)}`, 'penwidth=3');
    out.push(`  ${dotString(n.id)} [${attrs.join(', ')}];`);
  }
  for (const e of g.edges) out.push(`  ${dotString(e.from)} -> ${dotString(e.to)} [${dotEdgeAttrs(e)}];`);
  out.push('}');
  return `${out.join('\n')}\n`;
}

function dotEdgeAttrs(e: GraphEdge): string {
  const attrs = e.kind === 'rework' ? ['style=dashed', 'color="#9333ea"', 'constraint=false'] : [];
  if (e.label) attrs.push(`label=${dotString(e.label)}`);
  if (e.label === 'changes asked') attrs.push('color="#dc2626"', 'fontcolor="#dc2626"');
  return attrs.join(', ');
}

/** Mermaid flowchart text (GitHub renders it in Markdown). */
export function toMermaid(g: ArtefactGraph): string {
  const ids = new Map(g.nodes.map((n, i) => [n.id, `a${i}`]));
  const esc = (s: string) =>
    s
      .replaceAll('"', '#quot;')
      .replaceAll('<', '#lt;')
      .replaceAll('>', '#gt;')
      .replace(/[\r\n]+/g, ' ');
  const out = ['flowchart LR'];
  for (const n of g.nodes) {
    const [open, close] =
      n.structural === 'Terminal'
        ? ['(["', '"])']
        : n.structural === 'Question'
          ? ['{{"', '"}}']
          : ['["', '"]'];
    out.push(`  ${ids.get(n.id)}${open}${labelLines(n).map(esc).join('<br/>')}${close}`);
  }
  for (const e of g.edges) {
    const arrow = e.kind === 'rework' ? '-.->' : '-->';
    out.push(`  ${ids.get(e.from)} ${arrow}${e.label ? `|${esc(e.label)}|` : ''} ${ids.get(e.to)}`);
  }
  for (const n of g.nodes) {
    const stroke = n.active ? `,stroke:${ACTIVE},stroke-width:3px` : '';
    out.push(`  style ${ids.get(n.id)} fill:${fillOf(n)}${stroke}`);
  }
  return `${out.join('\n')}\n`;
}
