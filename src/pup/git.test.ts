import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmSync, utimesSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeTempDir, removeDir } from '../../test/harness/tmp.ts';
import { silentLogger } from '../common/logger.ts';
import { checkCommit, commitRefProblem, filterNames, gitSync } from './git.ts';
import { LocalToolRunner } from './runner/runner.ts';
import { SocketToolRunner, startRunnerServer } from './runner/socket.ts';
import { AGENTS } from './testkit.ts';

const SECRET = 'redis://pup:s3cret-planted-0123456789@127.0.0.1:6379';
let base: string;

/** A workspace as the hostile tool leaves it (test/fixtures/agents/git-plant.mjs); its commit id. */
function planted(name: string): { ws: string; dump: string; head: string } {
  const ws = join(base, name);
  mkdirSync(ws);
  const dump = join(ws, '.git', 'holt-plant-dump');
  const out = execFileSync(process.execPath, [join(AGENTS, 'git-plant.mjs'), 'head'], {
    cwd: ws,
    input: '',
    encoding: 'utf8',
  });
  return { ws, dump, head: JSON.parse(out).artefact_payload };
}

beforeAll(() => {
  base = makeTempDir('git-plant');
});
afterAll(() => removeDir(base));

describe('a CodeCommit reference is a full object id, nothing git would resolve', () => {
  it('refuses names, short ids and options; takes 40 and 64 hex digits', () => {
    for (const bad of [
      ':README',
      'HEAD',
      'main',
      'f4be2d6',
      `${'a'.repeat(39)}`,
      `-${'a'.repeat(40)}`,
      'A'.repeat(40),
    ])
      expect(commitRefProblem(bad), bad).toMatch(/^not a full commit id/);
    expect(commitRefProblem('a'.repeat(40))).toBeUndefined();
    expect(commitRefProblem('0'.repeat(64))).toBeUndefined();
  });

  it('filter driver names are read from git config output; one git cannot override is refused', () => {
    expect(filterNames('filter.lfs.clean\nfilter.lfs.smudge\nfilter.a.b.process\n')).toEqual(['lfs', 'a.b']);
    expect(filterNames('')).toEqual([]);
    expect(filterNames('filter.x=y.clean\n')).toBeUndefined();
  });
});

describe('git in a planted workspace runs nothing the workspace planted', () => {
  it('the control: naive git runs the plant with the caller environment (fsmonitor, partial clone, filter)', () => {
    const { ws, dump } = planted('control');
    const naive = (args: string[]) => {
      try {
        execFileSync('git', args, { cwd: ws, env: { ...process.env, SECRET }, stdio: 'ignore' });
      } catch {
        // the plant exits 1; git may fail after it ran
      }
    };
    naive(['cat-file', '-e', ':README']);
    expect(readFileSync(dump, 'utf8')).toContain(SECRET);
    rmSync(dump);
    naive(['cat-file', '-e', '1'.repeat(40)]);
    expect(readFileSync(dump, 'utf8')).toMatch(/planted ran: .*plant\.sh/);
    rmSync(dump);
    // git reads a file (through the clean filter) only when its stat no longer matches the index: a later
    // mtime makes sure of it, whatever the clock did since the plant (see git-plant.mjs).
    const later = new Date(Date.now() + 3_600_000);
    utimesSync(join(ws, 'README'), later, later);
    naive(['-c', 'core.fsmonitor=false', 'status', '--porcelain']);
    expect(readFileSync(dump, 'utf8')).toContain(SECRET);
  });

  it('checkCommit, the CLI reads (status, rev-parse) and both runners: the plant never runs', async () => {
    const { ws, dump, head } = planted('hardened');
    const env = { PATH: process.env.PATH, SECRET };
    expect(await checkCommit(ws, head, env)).toEqual({ ok: true, detail: '' });
    // A missing object of a partial clone: git would fetch it through the planted uploadpack.
    expect(await checkCommit(ws, '1'.repeat(40), env)).toMatchObject({ ok: false });
    expect(await checkCommit(ws, ':README', env)).toMatchObject({
      ok: false,
      detail: /not a full commit id/,
    });
    const tree = execFileSync('git', ['rev-parse', `${head}^{tree}`], { cwd: ws, encoding: 'utf8' }).trim();
    expect(await checkCommit(ws, tree, env)).toEqual({
      ok: false,
      detail: `${tree} is a tree, not a commit`,
    });
    expect(gitSync(ws, ['status', '--porcelain'], { compare: true, base: env })).toMatch(/README/);
    expect(gitSync(ws, ['rev-parse', '--show-toplevel'], { base: env }).trim()).toBe(ws);

    expect(await new LocalToolRunner({ ...process.env, SECRET }).commit({ root: ws, rev: head })).toEqual({
      ok: true,
      detail: '',
    });
    const socket = join(base, 'runner.sock');
    const server = await startRunnerServer({ socket, env: { ...process.env, SECRET }, log: silentLogger() });
    try {
      const runner = new SocketToolRunner(socket);
      expect(await runner.commit({ root: ws, rev: head })).toEqual({ ok: true, detail: '' });
      expect(await runner.commit({ root: ws, rev: '1'.repeat(40) })).toMatchObject({ ok: false });
    } finally {
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
    expect(existsSync(dump)).toBe(false);
  });
});
