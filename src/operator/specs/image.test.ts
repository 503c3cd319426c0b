import { execFileSync } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { HoltSpec } from '../../api/holt.ts';
import { program } from '../../cli/main.ts';
import type { KubeObject } from '../kube/kube.ts';
import { ownerOf } from './meta.ts';
import { migrationJob } from './migration.ts';
import { HOLT_BIN, orchestratorDeployment } from './orchestrator.ts';

const ROOT = join(import.meta.dirname, '../../..');
const read = (p: string) => readFileSync(join(ROOT, p), 'utf8');
const owner = ownerOf({
  apiVersion: 'holt.io/v1alpha1',
  kind: 'Holt',
  metadata: { name: 'demo', namespace: 'ns', uid: 'u1' },
});
type Pod = { spec: { template: { spec: { containers: { command?: string[]; args?: string[] }[] } } } };
/** What a runtime-image container runs: its command, else the image's entrypoint with its args. */
const ENTRYPOINT = ['/usr/bin/tini', '--', HOLT_BIN];
const commandOf = (o: KubeObject) => {
  const c = (o as unknown as Pod).spec.template.spec.containers[0];
  return c?.command ?? [...ENTRYPOINT, ...(c?.args ?? [])];
};

describe('the pods and the runtime image agree', () => {
  it('the runtime image puts the holt launcher where the pods run it, and it starts the compiled CLI', () => {
    const dockerfile = read('images/runtime.Dockerfile');
    expect(dockerfile).toContain(`COPY images/launcher.sh ${HOLT_BIN}\n`);
    // tsc -p tsconfig.build.json compiles src/ to dist/, copied to /opt/holt/app.
    expect(dockerfile).toContain('COPY --from=build /src/dist /opt/holt/app');
    expect(JSON.parse(read('tsconfig.build.json')).compilerOptions).toMatchObject({
      rootDir: 'src',
      outDir: 'dist',
    });
    expect(read('images/launcher.sh')).toContain('"$here/app/cli/main.js"');
  });

  it('the launcher starts a pup with a 1 MB young generation, other commands without', () => {
    const dir = mkdtempSync(join(tmpdir(), 'launcher-'));
    try {
      mkdirSync(join(dir, 'bin'));
      copyFileSync(join(ROOT, 'images/launcher.sh'), join(dir, 'bin/holt'));
      // A stand-in node that prints the argv it was given.
      writeFileSync(join(dir, 'bin/node'), '#!/bin/sh\necho "$@"\n', { mode: 0o755 });
      const run = (...args: string[]) =>
        execFileSync('sh', [join(dir, 'bin/holt'), ...args], { encoding: 'utf8' }).trim();
      expect(run('pup')).toBe(
        `--max-semi-space-size=1 --no-warnings=ExperimentalWarning ${dir}/app/cli/main.js pup`,
      );
      expect(run('orchestrator')).toBe(
        `--no-warnings=ExperimentalWarning ${dir}/app/cli/main.js orchestrator`,
      );
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('every subcommand a pod runs exists in the CLI', () => {
    const spec = HoltSpec.parse({});
    const used = [migrationJob(owner, spec, 'img'), orchestratorDeployment(owner, spec, 'img')].map(
      commandOf,
    );
    const subcommands = new Set(program().commands.map((c) => c.name()));
    expect(read('images/runtime.Dockerfile')).toContain(
      `ENTRYPOINT ${JSON.stringify(ENTRYPOINT).replaceAll(',', ', ')}`,
    );
    for (const cmd of used) {
      expect(cmd.slice(0, 3)).toEqual(ENTRYPOINT);
      expect(subcommands).toContain(cmd[3]);
    }
    expect(subcommands).toContain('pup');
  });
});
