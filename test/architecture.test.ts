import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';

/**
 * Which folder of src/ may import which. Lower layers never import higher ones, so the runtime is layered
 * one way: protocol rules (blackboard) below everything, the pup core below its executors (llm), and the
 * composition roots (agent, cli) on top. A new folder must be placed here before it builds.
 */
const MAY_IMPORT: Record<string, string[]> = {
  common: [],
  access: ['common'],
  telemetry: ['common'],
  blackboard: ['common', 'telemetry'],
  api: ['blackboard', 'common'],
  bus: ['blackboard', 'common', 'telemetry'],
  state: ['access', 'blackboard', 'common'],
  inbox: ['blackboard', 'bus', 'common', 'state', 'telemetry'],
  orchestrator: [
    'a2a',
    'blackboard',
    'bus',
    'common',
    'console',
    'inbox',
    'ingress',
    'life',
    'state',
    'telemetry',
  ],
  pup: ['blackboard', 'bus', 'common', 'inbox', 'state', 'telemetry'],
  work: ['common', 'state'],
  memory: ['common', 'life', 'state', 'telemetry'],
  console: ['access', 'blackboard', 'common', 'graph', 'life', 'memory', 'telemetry', 'work'],
  life: ['access', 'blackboard', 'bus', 'common', 'inbox', 'state', 'telemetry', 'work'],
  a2a: ['access', 'life'],
  ingress: ['a2a', 'access', 'common', 'life', 'telemetry'],
  llm: [
    'a2a',
    'api',
    'blackboard',
    'bus',
    'common',
    'inbox',
    'life',
    'memory',
    'pup',
    'state',
    'telemetry',
    'work',
  ],
  agent: ['common', 'llm', 'pup', 'telemetry'],
  graph: ['blackboard'],
  'mcp-server': ['blackboard', 'telemetry'],
  'mcp-bridge': ['common'],
  local: ['access', 'api', 'blackboard', 'common', 'state'],
  operator: ['access', 'api', 'blackboard', 'bus', 'common', 'inbox', 'telemetry'],
  cli: [
    'telemetry',
    'access',
    'agent',
    'api',
    'blackboard',
    'common',
    'console',
    'graph',
    'ingress',
    'life',
    'local',
    'mcp-bridge',
    'mcp-server',
    'memory',
    'operator',
    'orchestrator',
    'pup',
    'state',
    'work',
  ],
};

const ROOT = resolve(import.meta.dirname, '..');
const SRC = join(ROOT, 'src');

/** Test code (tests, test kits, fixtures) may reach anything; the rules are for what ships. */
const isTestCode = (file: string) =>
  /\.test\.ts$|(^|\/)testkit\.ts$|\.testkit\.ts$/.test(file) || file.split('/').includes('fixtures');

function sourceFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) return sourceFiles(p);
    return p.endsWith('.ts') ? [p] : [];
  });
}

interface Edge {
  from: string;
  line: number;
  to: string;
}

/**
 * The code of a file with its comments blanked (strings and template literals kept, newlines kept so
 * line numbers hold): a comment that mentions an import is not one.
 */
function withoutComments(text: string): string {
  let out = '';
  let quote: string | null = null;
  for (let i = 0; i < text.length; i++) {
    const c = text[i] as string;
    if (quote) {
      out += c;
      if (c === '\\') out += text[++i] ?? '';
      else if (c === quote) quote = null;
    } else if (c === '/' && text[i + 1] === '/') {
      while (i < text.length && text[i] !== '\n') i++;
      out += '\n';
    } else if (c === '/' && text[i + 1] === '*') {
      const end = text.indexOf('*/', i + 2);
      const stop = end < 0 ? text.length : end + 2;
      out += text.slice(i, stop).replace(/[^\n]/g, ' ');
      i = stop - 1;
    } else {
      if (c === "'" || c === '"' || c === '`') quote = c;
      out += c;
    }
  }
  return out;
}

/**
 * Every relative import of a file, resolved to a path under ROOT: `import … from`, `export … from`,
 * `import type`, side-effect imports and dynamic `import()`. (TypeScript 7 has no JavaScript API to
 * ask, and the sources are formatted by Biome, so statements have one shape.)
 */
function importsOf(file: string): Edge[] {
  const code = withoutComments(readFileSync(file, 'utf8'));
  const found: Edge[] = [];
  const patterns = [
    /(?:^|[;\n])\s*(?:import|export)\b[^;'"`]*?\bfrom\s*'([^']+)'/g,
    /(?:^|[;\n])\s*import\s*'([^']+)'/g,
    /\bimport\(\s*'([^']+)'\s*\)/g,
  ];
  for (const re of patterns) {
    for (const m of code.matchAll(re)) {
      const spec = m[1] as string;
      if (!spec.startsWith('.')) continue;
      found.push({
        from: relative(ROOT, file),
        line: code.slice(0, (m.index ?? 0) + m[0].indexOf(spec)).split('\n').length,
        to: relative(ROOT, resolve(dirname(file), spec)),
      });
    }
  }
  return found;
}

const folderOf = (path: string) => path.split('/')[1] as string;

const shipped = sourceFiles(SRC)
  .map((f) => relative(ROOT, f))
  .filter((f) => !isTestCode(f));
const edges = shipped.flatMap((f) => importsOf(join(ROOT, f)));

describe('architecture: which folder may import which', () => {
  it('places every folder of src/ in the layering', () => {
    const folders = readdirSync(SRC).filter((n) => statSync(join(SRC, n)).isDirectory());
    expect(folders.filter((f) => !(f in MAY_IMPORT))).toEqual([]);
    expect(Object.keys(MAY_IMPORT).filter((f) => !folders.includes(f))).toEqual([]);
  });

  it('has no import across folders that the layering does not allow', () => {
    const bad = edges
      .filter((e) => e.to.startsWith('src/'))
      .filter((e) => folderOf(e.from) !== folderOf(e.to))
      .filter((e) => !MAY_IMPORT[folderOf(e.from)]?.includes(folderOf(e.to)))
      .map((e) => `${e.from}:${e.line} imports ${e.to}`);
    expect(bad).toEqual([]);
  });

  it('allows no edge that no shipped import uses (the layering says what is, not what might be)', () => {
    const used = new Set(
      edges
        .filter((e) => e.to.startsWith('src/') && folderOf(e.from) !== folderOf(e.to))
        .map((e) => `${folderOf(e.from)} → ${folderOf(e.to)}`),
    );
    const unused = Object.entries(MAY_IMPORT).flatMap(([f, tos]) =>
      tos.map((t) => `${f} → ${t}`).filter((edge) => !used.has(edge)),
    );
    expect(unused).toEqual([]);
  });

  it('ships no import of test code or of anything outside src/', () => {
    const bad = edges
      .filter((e) => !e.to.startsWith('src/') || isTestCode(e.to))
      .map((e) => `${e.from}:${e.line} imports ${e.to}`);
    expect(bad).toEqual([]);
  });

  it('allows no cycle between folders', () => {
    // Depth-first over the allowed graph: a folder met again on the current path closes a cycle.
    const cycles: string[] = [];
    const visit = (f: string, path: string[]) => {
      if (path.includes(f)) {
        cycles.push([...path.slice(path.indexOf(f)), f].join(' → '));
        return;
      }
      for (const g of MAY_IMPORT[f] ?? []) visit(g, [...path, f]);
    };
    for (const f of Object.keys(MAY_IMPORT)) visit(f, []);
    expect(cycles).toEqual([]);
  });

  it('reads the imports it judges (a sanity check on the parser)', () => {
    const fromAgent = edges.filter((e) => e.from === 'src/agent/wiring.ts').map((e) => e.to);
    expect(fromAgent).toContain('src/llm/plugin.ts'); // the dynamic import
    expect(fromAgent).toContain('src/pup/pup.ts');
  });
});

/**
 * The actor's head and its turns (the fence every turn's write is checked against) have one owner:
 * only src/state/head.ts and head-inbox.ts write them; retention alone deletes finished ones. A store
 * that needs a head write asks them, so the fence's rules live in one place (src/state/README.md).
 */
const HEAD_WRITERS = ['src/state/head.ts', 'src/state/head-inbox.ts'];
const HEAD_PRUNERS = ['src/state/retention.ts'];
const HEAD_WRITE = /\b(INSERT\s+INTO|UPDATE|DELETE\s+FROM)\s+holt\.(agent_state_head|agent_turns)\b/gi;

function headWrites(file: string): { verb: string; table: string }[] {
  return [...withoutComments(readFileSync(join(ROOT, file), 'utf8')).matchAll(HEAD_WRITE)].map((m) => ({
    verb: (m[1] as string).split(/\s+/)[0]!.toUpperCase(),
    table: m[2] as string,
  }));
}

describe('architecture: one owner for the fence head', () => {
  it('writes holt.agent_state_head and holt.agent_turns only in src/state/head*.ts (deletes: retention)', () => {
    const bad = shipped.flatMap((f) =>
      headWrites(f)
        .filter((w) => !HEAD_WRITERS.includes(f) && !(w.verb === 'DELETE' && HEAD_PRUNERS.includes(f)))
        .map((w) => `${f}: ${w.verb} holt.${w.table}`),
    );
    expect(bad).toEqual([]);
  });

  it('finds the writes it judges (a sanity check on the scan)', () => {
    const seen = (f: string) => new Set(headWrites(f).map((w) => `${w.verb} ${w.table}`));
    expect([...seen('src/state/head.ts')].sort()).toEqual([
      'INSERT agent_state_head',
      'INSERT agent_turns',
      'UPDATE agent_state_head',
      'UPDATE agent_turns',
    ]);
    expect(seen('src/state/head-inbox.ts').has('UPDATE agent_state_head')).toBe(true);
    expect(seen('src/state/retention.ts').has('DELETE agent_turns')).toBe(true);
  });
});

describe('architecture: files of one job', () => {
  it('has no file in src/ over 500 lines (tests included)', () => {
    const long = sourceFiles(SRC)
      .map((f) => ({ f: relative(ROOT, f), n: readFileSync(f, 'utf8').split('\n').length - 1 }))
      .filter(({ n }) => n > 500)
      .map(({ f, n }) => `${f}: ${n} lines`);
    expect(long).toEqual([]);
  });
});
