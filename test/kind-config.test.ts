import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { cacheDir } from '../src/local/bins.ts';
import { makeTempDir } from './harness/tmp.ts';

/**
 * kind cannot run on the project's machines (its node image comes from a registry), so its config is
 * checked against kind's own Go types instead: e2e/kind/check decodes it strictly.
 */
const ROOT = join(import.meta.dirname, '..');
const KIND_VERSION = 'v0.30.0';
let checker: string;

beforeAll(() => {
  const dir = join(cacheDir(), 'kind-check', KIND_VERSION);
  checker = join(dir, 'check');
  if (existsSync(checker)) return;
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'main.go'), readFileSync(join(ROOT, 'e2e', 'kind', 'check', 'main.go')));
  const go = (...args: string[]) =>
    execFileSync('go', args, { cwd: dir, stdio: 'pipe', env: { ...process.env, CGO_ENABLED: '0' } });
  if (!existsSync(join(dir, 'go.mod'))) go('mod', 'init', 'holt.local/kind-check');
  go('get', `sigs.k8s.io/kind@${KIND_VERSION}`, 'sigs.k8s.io/yaml');
  go('build', '-o', checker, '.');
}, 300_000);

const check = (file: string) => {
  try {
    return { ok: true, out: execFileSync(checker, [file], { encoding: 'utf8' }) };
  } catch (e) {
    return { ok: false, out: String((e as { stderr?: Buffer }).stderr) };
  }
};

describe('e2e/kind', () => {
  it('cluster.yaml is a kind config kind accepts: a control plane and a worker on a 1.34 node image', () => {
    const file = join(ROOT, 'e2e', 'kind', 'cluster.yaml');
    expect(check(file)).toEqual({ ok: true, out: 'ok: 2 nodes\n' });
    const c = parse(readFileSync(file, 'utf8')) as { nodes: { role: string; image: string }[] };
    expect(c.nodes.map((n) => n.role)).toEqual(['control-plane', 'worker']);
    for (const n of c.nodes) expect(n.image).toMatch(/^kindest\/node:v1\.34\./);
  });

  it('the check refuses a misspelt field and an unknown role', () => {
    const dir = makeTempDir('kind');
    const bad = join(dir, 'bad.yaml');
    writeFileSync(
      bad,
      'kind: Cluster\napiVersion: kind.x-k8s.io/v1alpha4\nnodes:\n  - role: control-plane\n    imag: x\n',
    );
    expect(check(bad)).toMatchObject({
      ok: false,
      out: expect.stringContaining('unknown field "imag"'),
    });
    writeFileSync(bad, 'kind: Cluster\napiVersion: kind.x-k8s.io/v1alpha4\nnodes:\n  - role: master\n');
    expect(check(bad)).toMatchObject({
      ok: false,
      out: expect.stringContaining('neither control-plane nor worker'),
    });
  });

  it('the CI workflow runs make e2e-kind, a target the Makefile has', () => {
    const wf = parse(readFileSync(join(ROOT, '.github', 'workflows', 'e2e-kind.yml'), 'utf8')) as {
      jobs: Record<string, { steps: { run?: string }[] }>;
    };
    const runs = Object.values(wf.jobs).flatMap((j) => j.steps.map((s) => s.run ?? ''));
    expect(runs.some((r) => r.includes('make e2e-kind'))).toBe(true);
    expect(readFileSync(join(ROOT, 'Makefile'), 'utf8')).toMatch(/^e2e-kind:/m);
  });
});
