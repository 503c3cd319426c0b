import { expect, it } from 'vitest';
import { c, type Pod, progress, until } from '../ctx.ts';
import { notApplicable } from '../not-applicable.ts';

/** The real cluster: a node that stops. */
export function nodesTests(): void {
  it('two nodes: the pods of a node that stops are rescheduled on the other', async (ctx) => {
    const local = c.local;
    if (!local || local.nodes.length < 2)
      return notApplicable(
        ctx,
        "stopping a node needs the project's own cluster with two nodes (make cluster-up NODES=2)",
      );
    type OpPod = Pod & { status: { conditions?: { type: string; status: string }[] } };
    const opPods = async () =>
      (
        (await c.kubectl(['-n', 'holt-system', 'get', 'pods', '-o', 'json']).then((o) => JSON.parse(o))) as {
          items: OpPod[];
        }
      ).items;
    const before = (await opPods())[0]!;
    const node = before.spec.nodeName!;
    progress(`stopping ${node}, where the operator runs`);
    await local.stopNode(node);
    await until(
      'the operator to run Ready on the other node',
      async () => {
        const moved = (await opPods()).find(
          (p) =>
            p.spec.nodeName &&
            p.spec.nodeName !== node &&
            p.status.conditions?.some((k) => k.type === 'Ready' && k.status === 'True'),
        );
        return moved ? true : undefined;
      },
      300_000,
    );
    const nodes = JSON.parse(await c.kubectl(['get', 'node', node, '-o', 'json'])) as {
      status: { conditions: { type: string; status: string }[] };
    };
    expect(nodes.status.conditions.find((k) => k.type === 'Ready')?.status).not.toBe('True');
  }, 600_000);
}
