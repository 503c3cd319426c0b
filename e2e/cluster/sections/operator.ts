import { expect, it } from 'vitest';
import { VERSION } from '../../../src/common/version.ts';
import { c, NS, type Pod } from '../ctx.ts';

/** The real cluster: the operator as the chart installs it. */
export function operatorTests(): void {
  it('helm install: the operator pod is Ready through its probes, as the built image', async () => {
    const op = (await c.kubectl(['-n', 'holt-system', 'get', 'pods', '-o', 'json'])) as string;
    const items = (
      JSON.parse(op) as {
        items: (Pod & { spec: { containers: { image: string; readinessProbe?: object }[] } })[];
      }
    ).items;
    expect(items).toHaveLength(1);
    expect(items[0]!.spec.containers[0]!.image).toBe(`ghcr.io/holt-k8s/operator:${VERSION}`);
    expect(items[0]!.spec.containers[0]!.readinessProbe).toBeDefined();
    expect(items[0]!.status.containerStatuses?.[0]?.ready).toBe(true);
    // Its rights on this cluster: the watched namespace only, and Secrets by name, never listed.
    const canI = async (...args: string[]) =>
      (
        await c.kubectlResult(
          ['auth', 'can-i', ...args, '--as=system:serviceaccount:holt-system:holt-operator'],
          {
            allowFail: true,
          },
        )
      ).stdout.trim();
    expect(await canI('get', 'secrets', '-n', NS)).toBe('yes');
    expect(await canI('create', 'deployments.apps', '-n', NS)).toBe('yes');
    expect(await canI('list', 'secrets', '-n', NS)).toBe('no');
    expect(await canI('watch', 'secrets', '-n', NS)).toBe('no');
    expect(await canI('get', 'secrets', '-n', 'kube-system')).toBe('no');
    expect(await canI('create', 'deployments.apps', '-n', 'default')).toBe('no');
    expect(await canI('create', 'pods', '-n', NS)).toBe('no');
  });
}
