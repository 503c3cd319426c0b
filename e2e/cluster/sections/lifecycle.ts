import { expect, it } from 'vitest';
import { eventually } from '../../../test/harness/wait.ts';
import { CLUSTER_WAIT, c, holtIn, LIFE_NS, type Pod, progress } from '../ctx.ts';
import { holtDoc, lifeManifests, yamlDocs } from '../manifests.ts';

/** The real cluster: issue 29's lifecycle: Ready means bidding, goals never lost, namespaces that delete. */
export function lifecycleTests(): void {
  it('issue 29: a goal posted the moment `kubectl wait` says a brand-new Holt is Ready finishes', async () => {
    await c.kubectl(['-n', LIFE_NS, 'apply', '-f', '-'], { input: lifeManifests() });
    // Ready means every Agent's pup is up and bidding: a goal posted now is never closed unheard.
    // kubectl's own timeout stays under the harness's 2 min per command: it is asked again until it returns.
    await eventually(
      'kubectl wait --for=condition=Ready holt/life',
      async () =>
        (
          await c.kubectlResult(
            ['-n', LIFE_NS, 'wait', '--for=condition=Ready', 'holt/life', '--timeout=100s'],
            {
              allowFail: true,
            },
          )
        ).code === 0 || undefined,
      { ...CLUSTER_WAIT, timeoutMs: 420_000 },
    );
    progress('life Ready; posting the goal at once');
    const r = await holtIn(LIFE_NS, 'life', ['forage', '--goal', 'write it', '--watch']);
    expect(r.stdout).toContain('Workflow completed');
    const st = await holtIn(LIFE_NS, 'life', ['status']);
    expect(st.stdout).not.toContain('Dormant claims');
  }, 600_000);

  it("issue 29: a goal posted while an agent's pod is being replaced finishes once the pod is back", async () => {
    const writer = (
      JSON.parse(
        await c.kubectl([
          '-n',
          LIFE_NS,
          'get',
          'pods',
          '-l',
          'holt.io/instance=life,holt.io/role=Writer',
          '-o',
          'json',
        ]),
      ) as { items: Pod[] }
    ).items[0]!;
    await c.kubectl(['-n', LIFE_NS, 'delete', 'pod', writer.metadata.name, '--wait=false']);
    progress(`deleted ${writer.metadata.name}; posting the goal`);
    // The Writer is silent while its new pod starts: the claim may go dormant (5 s bid timeout) and is
    // re-opened by the new pup's bid, or the new pup bids in time. Either way the workflow finishes.
    const r = await holtIn(LIFE_NS, 'life', ['forage', '--goal', 'write it again', '--watch']);
    expect(r.stdout).toContain('Workflow completed');
  }, 600_000);

  it('issue 29: a Holt in a namespace the operator does not watch: holt status says so', async () => {
    const ns = 'holt-e2e-unwatched';
    await c.kubectl(['create', 'namespace', ns]);
    try {
      await c.kubectl(['-n', ns, 'apply', '-f', '-'], {
        input: yamlDocs([holtDoc('lost')]),
      });
      const r = await holtIn(ns, 'lost', ['status']);
      expect(r.code).not.toBe(0);
      expect(r.stderr).toContain(`namespace ${ns} is not watched`);
      expect(r.stderr).toContain('holt-system/holt-operator watches');
    } finally {
      await c.kubectl(['delete', 'namespace', ns, '--wait=false']);
    }
  }, 120_000);

  it('issue 29: deleting the namespace of a Holt with a workflow running: it is gone within a minute', async () => {
    await holtIn(LIFE_NS, 'life', ['forage', '--goal', 'slow work']);
    await eventually(
      'the slow goal granted to the Writer',
      async () => {
        const st = await holtIn(LIFE_NS, 'life', ['status', '--json']);
        const claims = (JSON.parse(st.stdout || '{}') as { claims?: Record<string, number> }).claims ?? {};
        return (claims.pending_exclusive ?? 0) > 0 ? true : undefined;
      },
      { ...CLUSTER_WAIT, timeoutMs: 180_000 },
    );
    progress(`deleting namespace ${LIFE_NS}`);
    await c.kubectl(['delete', 'namespace', LIFE_NS, '--wait=false']);
    // The bound is the requirement: nothing (an Agent's finalizer the operator can no longer remove
    // once its RoleBinding is gone) may hold the namespace in Terminating.
    const gone = await eventually(
      `namespace ${LIFE_NS} gone`,
      async () =>
        (await c.kubectlResult(['get', 'namespace', LIFE_NS], { allowFail: true })).code !== 0
          ? true
          : undefined,
      {
        timeoutMs: 60_000,
        intervalMs: 1000,
        describe: async () =>
          (
            await c.kubectlResult(
              [
                '-n',
                LIFE_NS,
                'get',
                'holts,agents,pods,pvc,statefulsets',
                '-o',
                'custom-columns=KIND:.kind,NAME:.metadata.name,FINALIZERS:.metadata.finalizers,DELETED:.metadata.deletionTimestamp',
              ],
              { allowFail: true },
            )
          ).stdout,
      },
    );
    expect(gone).toBe(true);
  }, 300_000);
}
