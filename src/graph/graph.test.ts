import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import type { Artefact, Claim } from '../blackboard/types.ts';
import { artefactGraph, workflowOf } from './model.ts';
import { graphPage } from './page.ts';
import { toDot, toMermaid } from './render.ts';
import { dotToSvg } from './svg.ts';

let clock = 1_000;
function art(type: string, over: Partial<Artefact> = {}): Artefact {
  return {
    id: randomUUID(),
    logical_id: randomUUID(),
    version: 1,
    structural_type: 'Standard',
    type,
    payload: '',
    source_artefacts: [],
    produced_by_role: 'user',
    created_at_ms: clock++,
    ...over,
  };
}
const claim = (a: Artefact, over: Partial<Claim> = {}): Claim => ({
  id: randomUUID(),
  artefact_id: a.id,
  status: 'complete',
  granted_review_agents: [],
  granted_parallel_agents: [],
  granted_exclusive_agent: '',
  ...over,
});

/** Goal → Draft v1 → rejected → Draft v2 → approved → Commit (in progress); and another workflow. */
function demo() {
  const goal = art('GoalDefined');
  const d1 = art('Draft', { source_artefacts: [goal.id], produced_by_role: 'Drafter' });
  const r1 = art('Review', {
    structural_type: 'Review',
    source_artefacts: [d1.id],
    produced_by_role: 'Reviewer',
    payload: 'add a summary',
  });
  const d2 = art('Draft', {
    logical_id: d1.logical_id,
    version: 2,
    source_artefacts: [goal.id],
    produced_by_role: 'Drafter',
  });
  const r2 = art('Review', {
    structural_type: 'Review',
    source_artefacts: [d2.id],
    produced_by_role: 'Reviewer',
    payload: '{}',
  });
  const commit = art('CodeCommit', { source_artefacts: [d2.id], produced_by_role: 'Committer' });
  const other = art('GoalDefined', { payload: 'another' });
  const claims = new Map<string, Claim>([
    [goal.id, claim(goal)],
    [d1.id, claim(d1, { status: 'terminated' })],
    [d2.id, claim(d2)],
    [commit.id, claim(commit, { status: 'pending_exclusive', granted_exclusive_agent: 'Finisher' })],
    [other.id, claim(other, { status: 'pending_review' })],
  ]);
  return { goal, d1, r1, d2, r2, commit, other, all: [goal, d1, r1, d2, r2, commit, other], claims };
}

describe('the artefact graph', () => {
  it('a node per artefact, an edge per source, verdicts on reviews, rework from v1 to v2, the grant in progress', () => {
    const w = demo();
    const g = artefactGraph(w.all, w.claims);
    expect(g.nodes.map((n) => n.id)).toEqual(w.all.map((a) => a.id));
    expect(g.goals).toEqual([w.goal.id, w.other.id]);
    const node = (id: string) => g.nodes.find((n) => n.id === id)!;
    expect(node(w.r1.id).verdict).toBe('rejected');
    expect(node(w.r2.id).verdict).toBe('approved');
    expect(node(w.commit.id)).toMatchObject({
      active: true,
      claim: { status: 'pending_exclusive', grantees: ['Finisher'] },
    });
    // Pending review with nobody granted yet: open, not in progress.
    expect(node(w.other.id).active).toBe(false);
    expect(node(w.d1.id)).toMatchObject({ active: false, claim: { status: 'terminated' } });
    expect(g.edges).toContainEqual({ from: w.d1.id, to: w.r1.id, kind: 'source', label: 'changes asked' });
    expect(g.edges).toContainEqual({ from: w.d2.id, to: w.r2.id, kind: 'source', label: 'approved' });
    expect(g.edges).toContainEqual({ from: w.d1.id, to: w.d2.id, kind: 'rework', label: 'v2' });
    expect(g.edges.filter((e) => e.kind === 'source')).toHaveLength(5);
  });

  it('one workflow: the goal and everything made from it, transitively', () => {
    const w = demo();
    expect(workflowOf(w.all, w.goal.id).map((a) => a.id)).toEqual(
      [w.goal, w.d1, w.r1, w.d2, w.r2, w.commit].map((a) => a.id),
    );
    expect(workflowOf(w.all, w.other.id).map((a) => a.id)).toEqual([w.other.id]);
  });

  it('a source that is not drawn (another workflow, pruned) gives no edge and makes a root', () => {
    const w = demo();
    const g = artefactGraph([w.d2, w.r2], w.claims);
    expect(g.goals).toEqual([w.d2.id]);
    expect(g.edges).toEqual([{ from: w.d2.id, to: w.r2.id, kind: 'source', label: 'approved' }]);
  });
});

describe('drawing it', () => {
  it('DOT that Graphviz draws: every artefact a node, the grant highlighted, rework dashed', async () => {
    const w = demo();
    const dot = toDot(artefactGraph(w.all, w.claims), 'a "quoted" title');
    expect(dot).toContain('digraph "a \\"quoted\\" title" {');
    expect(dot).toMatch(new RegExp(`"${w.commit.id}" \\[[^\\]]*penwidth=3`));
    expect(dot).toMatch(new RegExp(`"${w.d1.id}" -> "${w.d2.id}" \\[style=dashed`));
    const svg = await dotToSvg(dot);
    expect(svg).toMatch(/^<\?xml[\s\S]*<svg[\s\S]*<\/svg>\s*$/);
    // Graphviz writes a node's name as its <title>, hyphens as &#45;.
    const title = (id: string) => `<title>${id.replaceAll('-', '&#45;')}</title>`;
    for (const a of w.all) expect(svg).toContain(title(a.id));
    expect(svg).toContain('▶ Finisher (exclusive)');
  });

  it('a label with quotes, backslashes and newlines cannot break out of the DOT string', async () => {
    const evil = art('Type"];\n"x" -> "y', { produced_by_role: 'role\\"' });
    const svg = await dotToSvg(toDot(artefactGraph([evil], new Map())));
    expect(svg).not.toContain('<title>x</title>');
    expect(svg).toContain(`<title>${evil.id.replaceAll('-', '&#45;')}</title>`);
    expect(svg.match(/class="node"/g)).toHaveLength(1);
  });

  it('Mermaid: a flowchart with a node per artefact, verdict labels, rework as a dotted arrow', () => {
    const w = demo();
    const m = toMermaid(artefactGraph(w.all, w.claims));
    const lines = m.trim().split('\n');
    expect(lines[0]).toBe('flowchart LR');
    expect(lines.filter((l) => /^ {2}a\d+[[({]/.test(l))).toHaveLength(w.all.length);
    expect(m).toContain('a1 -->|changes asked| a2');
    expect(m).toContain('a1 -.->|v2| a3');
    expect(m).toMatch(/style a5 fill:#dbeafe,stroke:#ea580c,stroke-width:3px/);
  });

  it('Mermaid escapes what would end a label', () => {
    const m = toMermaid(artefactGraph([art('A"]; click a0 "evil')], new Map()));
    expect(m).not.toContain('A"]');
    expect(m).toContain('#quot;');
  });
});

describe('the page', () => {
  it('self-contained, and blackboard text stays text: no element comes from an artefact type', async () => {
    const evil = art('<img src=x onerror=alert(1)>', { produced_by_role: '<script>' });
    const page = graphPage(
      await dotToSvg(toDot(artefactGraph([evil], new Map()), '<b>t</b>')),
      '<b>t</b>',
      true,
    );
    expect(page).not.toContain('<img');
    expect(page).not.toContain('<b>');
    expect(page).toContain('&lt;img src=x onerror=alert(1)&gt;');
    expect(page.match(/<script>/g)).toHaveLength(1); // ours, inline
    expect(page).not.toMatch(/<script[^>]*\ssrc=|<link\b/);
    expect(page).toContain("new EventSource('events')");
    expect(graphPage('<svg></svg>', 't', false)).not.toContain('<script');
  });
});
