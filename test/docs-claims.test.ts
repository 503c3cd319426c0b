import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

/**
 * Words that match proof (issue 29 item 9). The docs name their proofs as `path` › *test title*;
 * docs/claims.md tables every behavioural claim of the README that way. This keeps those names true:
 * each named file exists and holds the named title, so a renamed or deleted test fails here, not in
 * a reader's trust.
 */
const ROOT = join(import.meta.dirname, '..');

interface ProofRef {
  path: string;
  title: string;
}

/**
 * Every `path` › *title* in a Markdown text (the title a verbatim piece of the test's name, its line
 * breaks read as spaces, a trailing … cut); a bare › *title* names a test of the last `….ts` path before it.
 */
function proofRefs(md: string): ProofRef[] {
  const out: ProofRef[] = [];
  let last = '';
  for (const m of md.matchAll(/`([^`\s]+\.ts)`|›\s*\*([^*]+?)\*/g)) {
    if (m[1] !== undefined) {
      last = m[1];
      continue;
    }
    const title = (m[2] as string)
      .replace(/\s+/g, ' ')
      .trim()
      .replace(/(…|\.\.\.)$/, '');
    out.push({ path: last, title });
  }
  return out;
}

/** Every backticked path to a test file (`….test.ts`, `e2e/cluster/sections/….ts`) in a Markdown text. */
function testPaths(md: string): string[] {
  const out = new Set<string>();
  for (const m of md.matchAll(/`((?:src|test|e2e|bench)\/[^`\s*]+?\.ts)`/g)) {
    const p = m[1] as string;
    if (p.endsWith('.test.ts') || p.startsWith('e2e/cluster/sections/')) out.add(p);
  }
  return [...out];
}

/**
 * The sources a reference's title is searched in: the file itself, and for `e2e/cluster.test.ts`
 * its sections too (it runs them: e2e/cluster/sections/*.ts).
 */
function sources(
  path: string,
  read: (p: string) => string | undefined,
  list: (dir: string) => string[],
): string[] {
  const own = read(path);
  const texts = own === undefined ? [] : [own];
  if (path === 'e2e/cluster.test.ts') {
    for (const f of list('e2e/cluster/sections')) {
      const t = read(`e2e/cluster/sections/${f}`);
      if (t !== undefined) texts.push(t);
    }
  }
  return texts;
}

/** What is wrong with a document's proofs: a file that does not exist, a title not in its file. */
function problems(
  doc: string,
  md: string,
  read: (p: string) => string | undefined,
  list: (dir: string) => string[],
): string[] {
  const found: string[] = [];
  for (const p of testPaths(md)) if (read(p) === undefined) found.push(`${doc}: \`${p}\` does not exist`);
  for (const r of proofRefs(md)) {
    const texts = sources(r.path, read, list);
    if (texts.length === 0) found.push(`${doc}: \`${r.path}\` › *${r.title}*: no such file`);
    else if (!texts.some((t) => t.includes(r.title)))
      found.push(`${doc}: \`${r.path}\` › *${r.title}*: no test of that name in the file`);
  }
  return found;
}

const readRepo = (p: string): string | undefined => {
  const f = join(ROOT, p);
  return existsSync(f) ? readFileSync(f, 'utf8') : undefined;
};
const listRepo = (dir: string): string[] =>
  existsSync(join(ROOT, dir)) ? readdirSync(join(ROOT, dir)).filter((f) => f.endsWith('.ts')) : [];

const DOCS = [
  'README.md',
  ...readdirSync(join(ROOT, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .map((f) => `docs/${f}`),
];

/** The rows of docs/claims.md's README table: `| n | claim | proofs |`. */
function claimRows(md: string): { n: string; claim: string; proofs: string }[] {
  const start = md.indexOf('## README claims');
  const end = md.indexOf('\n## ', start + 1);
  const section = md.slice(start, end < 0 ? undefined : end);
  return section
    .split('\n')
    .filter((l) => /^\|\s*\d+\s*\|/.test(l))
    .map((l) => {
      const cells = l.split(' | ');
      return {
        n: (cells[0] as string).replace('|', '').trim(),
        claim: cells[1] ?? '',
        proofs: cells.slice(2).join(' | '),
      };
    });
}

describe('the docs name proofs that exist', () => {
  it('the checker itself catches a missing file and a title its file does not hold', () => {
    const files: Record<string, string> = { 'src/a.test.ts': "it('does the thing', () => {})" };
    const read = (p: string) => files[p];
    const md = [
      '`src/a.test.ts` › *does the thing*, › *does another',
      'thing*',
      '`src/gone.test.ts` › *anything*',
      'see `test/nowhere.test.ts`',
    ].join('\n');
    expect(problems('x.md', md, read, () => [])).toEqual([
      'x.md: `src/gone.test.ts` does not exist',
      'x.md: `test/nowhere.test.ts` does not exist',
      'x.md: `src/a.test.ts` › *does another thing*: no test of that name in the file',
      'x.md: `src/gone.test.ts` › *anything*: no such file',
    ]);
  });

  it('every README claim in docs/claims.md has a proof', () => {
    const md = readRepo('docs/claims.md') ?? '';
    const rows = claimRows(md);
    expect(rows.length).toBeGreaterThan(40);
    expect(proofRefs(md).length).toBeGreaterThan(100);
    expect(rows.filter((r) => proofRefs(r.proofs).length === 0).map((r) => `${r.n}: ${r.claim}`)).toEqual([]);
  });

  it.each(DOCS)('%s: every test file and test title it names exists', (doc) => {
    expect(problems(doc, readRepo(doc) ?? '', readRepo, listRepo)).toEqual([]);
  });
});
