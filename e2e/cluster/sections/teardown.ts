import { it } from 'vitest';
import { eventually } from '../../../test/harness/wait.ts';
import { CLUSTER_WAIT, c, kubectl, NS, progress } from '../ctx.ts';

/** The real cluster: deleting Holts leaves nothing behind. */
export function teardownTests(): void {
  it('deleting a Holt and its Agents leaves nothing behind', async () => {
    // The living Holt's tool service is the user's, not the Holt's: it goes by hand.
    await kubectl(['delete', 'deployment,service,configmap', 'builds', '--ignore-not-found', '--wait=true']);
    for (const name of ['demo', 'scale', 'demo-llm', 'trust', 'tls', 'living']) {
      await kubectl(['delete', 'holt', name, '--wait=true', '--timeout=180s']);
      await kubectl([
        'delete',
        'agents,workerpools,configmaps',
        '-l',
        `e2e.holt.io/holt=${name}`,
        '--wait=true',
        '--timeout=180s',
      ]);
    }
    // The Holts' own objects (the chart's Role in this namespace is the operator's, not a Holt's).
    await eventually(
      'every object of the Holts to be gone',
      async () => {
        const left = await c.kubectl([
          '-n',
          NS,
          'get',
          'all,pvc,secrets,configmaps,serviceaccounts,networkpolicies,pdb,roles,rolebindings',
          '-l',
          'holt.io/instance in (demo,scale,demo-llm,trust,tls,living)',
          '-o',
          'name',
        ]);
        const pvs = await c.kubectl(['get', 'pv', '-o', 'name']);
        if (left.trim() || pvs.trim()) progress(`left: ${left.trim().split('\n').join(' ')} ${pvs.trim()}`);
        return left.trim() === '' && pvs.trim() === '' ? true : undefined;
      },
      CLUSTER_WAIT,
    );
  }, 600_000);
}
