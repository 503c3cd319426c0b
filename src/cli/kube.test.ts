import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { loadKubeConfig, parseKubeRef } from './kube.ts';
import { CliError } from './output.ts';

describe('parseKubeRef', () => {
  it('reads NAMESPACE/NAME and NAME', () => {
    expect(parseKubeRef('team-a/demo')).toEqual({ namespace: 'team-a', name: 'demo' });
    expect(parseKubeRef('demo')).toEqual({ namespace: undefined, name: 'demo' });
  });
  it('refuses what is no Kubernetes name, as a usage error', () => {
    for (const bad of ['', 'a/b/c', 'Demo', 'ns/', '/demo', 'ns/de_mo']) {
      expect(() => parseKubeRef(bad)).toThrow(CliError);
      try {
        parseKubeRef(bad);
      } catch (e) {
        expect((e as CliError).code).toBe(2);
      }
    }
  });
});

describe('loadKubeConfig', () => {
  const saved = process.env.KUBECONFIG;
  let dir: string | undefined;
  afterEach(() => {
    process.env.KUBECONFIG = saved;
    if (dir) rmSync(dir, { recursive: true, force: true });
  });
  function kubeconfig(): void {
    dir = mkdtempSync(join(tmpdir(), 'kc-'));
    const cluster = (name: string) => ({ name, cluster: { server: `https://${name}.invalid:6443` } });
    const file = join(dir, 'config');
    writeFileSync(
      file,
      stringify({
        apiVersion: 'v1',
        kind: 'Config',
        clusters: [cluster('one'), cluster('two')],
        users: [{ name: 'u', user: { token: 't' } }],
        contexts: [
          { name: 'one', context: { cluster: 'one', user: 'u', namespace: 'ns-one' } },
          { name: 'two', context: { cluster: 'two', user: 'u' } },
        ],
        'current-context': 'one',
      }),
    );
    process.env.KUBECONFIG = file;
  }
  it('uses the current context as kubectl does, or the one named', () => {
    kubeconfig();
    expect(loadKubeConfig().getCurrentCluster()?.name).toBe('one');
    expect(loadKubeConfig('two').getCurrentCluster()?.name).toBe('two');
  });
  it('names the contexts there are when the one asked for is missing', () => {
    kubeconfig();
    expect(() => loadKubeConfig('three')).toThrow(/no context "three" in the kubeconfig \(known: one, two\)/);
  });
});
