import { execFile } from 'node:child_process';
import { copyFileSync, existsSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { startPostgres } from './harness/postgres.ts';

/**
 * images/*.Dockerfile, checked without a Docker engine: structure (multi-stage, non-root, exec-form
 * entrypoint, sources in the build context) and the build they run (`npm run build` → runnable JS).
 */
const ROOT = join(import.meta.dirname, '..');
const run = promisify(execFile);

interface Stage {
  from: string;
  name?: string;
  lines: string[];
}

function stages(file: string): Stage[] {
  const text = readFileSync(join(ROOT, 'images', file), 'utf8').replace(/\\\n/g, ' ');
  const out: Stage[] = [];
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (!line || line.startsWith('#')) continue;
    const from = /^FROM\s+(\S+)(?:\s+AS\s+(\S+))?/i.exec(line);
    if (from) out.push({ from: from[1]!, name: from[2], lines: [] });
    else out.at(-1)?.lines.push(line);
  }
  return out;
}

describe.each(['operator.Dockerfile', 'runtime.Dockerfile'])('images/%s', (file) => {
  const s = stages(file);
  const final = s.at(-1)!;
  const instr = (st: Stage, op: string) => st.lines.filter((l) => l.toUpperCase().startsWith(`${op} `));

  it('is multi-stage: compiles in one stage, ships only the output', () => {
    expect(s.length).toBeGreaterThanOrEqual(3);
    expect(s.some((st) => st.lines.some((l) => l.includes('npm run build')))).toBe(true);
    expect(final.name).toBeUndefined();
    expect(final.lines.some((l) => /npm (ci|install)/.test(l))).toBe(false);
    expect(instr(final, 'COPY').every((l) => l.includes('--from=') || !l.includes(' src'))).toBe(true);
  });

  it('runs as a numeric non-root user with an exec-form entrypoint', () => {
    const user = instr(final, 'USER').at(-1);
    expect(user).toMatch(/^USER [1-9]\d*(:[1-9]\d*)?$/);
    expect(instr(final, 'ENTRYPOINT').at(-1)).toMatch(/^ENTRYPOINT \[".+"\]$/);
  });

  it('copies only files that exist and the .dockerignore lets through', () => {
    const ignore = readFileSync(join(ROOT, '.dockerignore'), 'utf8');
    for (const st of s)
      for (const l of instr(st, 'COPY').filter((l) => !l.includes('--from='))) {
        const srcs = l.split(/\s+/).slice(1, -1);
        for (const src of srcs) {
          expect(existsSync(join(ROOT, src)), `${file}: ${src}`).toBe(true);
          expect(ignore, `${src} is excluded by .dockerignore`).toContain(`!${src}`);
        }
      }
  });
});

describe('runtime image bundle', () => {
  it('ships /opt/holt with its own node and the launchers', () => {
    const text = readFileSync(join(ROOT, 'images/runtime.Dockerfile'), 'utf8');
    expect(text).toContain('cp /usr/local/bin/node /opt/holt/bin/node');
    expect(text).toMatch(/COPY --from=bundle \/opt\/holt \/opt\/holt/);
    const launcher = readFileSync(join(ROOT, 'images/launcher.sh'), 'utf8');
    expect(launcher.startsWith('#!/bin/sh\n')).toBe(true);
    expect(launcher).toContain('"$here/bin/node"');
  });
});

describe('npm run build', () => {
  const out = join(ROOT, '.cache/build-test');
  afterAll(() => rmSync(out, { recursive: true, force: true }));

  it('emits runnable JavaScript with .js imports (what the images run)', async () => {
    // The build must succeed cleanly: an error here (e.g. a test helper pulled in from outside src/)
    // would also make tsc write stray .js files next to the sources.
    await run('npx', ['--no-install', 'tsc', '-p', 'tsconfig.build.json', '--outDir', out], { cwd: ROOT });
    for (const f of ['cli/main.js', 'agent/main.js', 'orchestrator/main.js'])
      expect(existsSync(join(out, f)), f).toBe(true);
    expect(existsSync(join(out, 'api/crd/apiserver.test.js'))).toBe(false);
    expect(readFileSync(join(out, 'cli/main.js'), 'utf8')).toContain("from '../common/config.js'");
    const help = await run(process.execPath, [join(out, 'cli/main.js'), '--help'], { cwd: ROOT });
    expect(help.stdout).toMatch(/Usage: holt/);
    expect(help.stdout).toMatch(/pup\s/);
    expect(help.stdout).toMatch(/migrate\s/);
    // The images put package.json beside the compiled tree: the version comes from it, for every program.
    copyFileSync(join(ROOT, 'package.json'), join(out, 'package.json'));
    const { version } = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string };
    for (const prog of [[], ['orchestrator'], ['pup'], ['operator'], ['migrate'], ['tool-runner']]) {
      const v = await run(process.execPath, [join(out, 'cli/main.js'), ...prog, '--version'], { cwd: ROOT });
      expect(v.stdout.trim(), `holt ${prog.join(' ')} --version`).toBe(version);
    }
    // The migration Job's command: the compiled migrations (.js) load and apply.
    const pg = await startPostgres();
    try {
      const m = await run(process.execPath, [join(out, 'cli/main.js'), 'migrate'], {
        cwd: ROOT,
        env: { ...process.env, DATABASE_URL: pg.url },
      });
      expect(m.stdout).toMatch(/"applied":[1-9]/);
    } finally {
      await pg.stop();
    }
  });
});
