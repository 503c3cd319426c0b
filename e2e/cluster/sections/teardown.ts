import { it } from 'vitest';
import { eventually } from '../../../test/harness/wait.ts';
import { CLUSTER_WAIT, c, kubectl, NS, progress } from '../ctx.ts';

/** The Holts the lanes leave for this test (the other sections delete their own). */
const HOLTS = ['demo', 'scale', 'demo-llm', 'trust', 'tls', 'living'];
/** A claim of one of HOLTS: `<holt>-workspace` or a store's `data-<holt>-<store>-0`. */
const OURS = new RegExp(`^(data-)?(${HOLTS.join('|')})-(workspace|redis-0|nats-0|postgres-0)$`);

/** The real cluster: deleting Holts leaves nothing behind. */
export function teardownTests(): void {
  it('deleting a Holt and its Agents leaves nothing behind', async () => {
    // What the lanes' Holts logged, before their pods (and so their logs) go.
    await c.keepLogs('before-teardown');
    // The living Holt's tool service is the user's, not the Holt's: it goes by hand.
    await kubectl(['delete', 'deployment,service,configmap', 'builds', '--ignore-not-found', '--wait=true']);
    for (const name of HOLTS) {
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
          `holt.io/instance in (${HOLTS.join(',')})`,
          '-o',
          'name',
        ]);
        // Volumes of these Holts' claims only: a section that failed keeps its own Holt, and its
        // volumes are that section's failure, not this test's.
        const claims = await c.kubectl([
          'get',
          'pv',
          '-o',
          'jsonpath={range .items[*]}{.metadata.name} {.spec.claimRef.namespace} {.spec.claimRef.name}{"\\n"}{end}',
        ]);
        const pvs = claims
          .split('\n')
          .map((l) => l.trim().split(' '))
          .filter(([pv, ns, claim]) => pv && ns === NS && OURS.test(claim ?? ''))
          .map(([pv]) => `persistentvolume/${pv}`)
          .join(' ');
        if (left.trim() || pvs) progress(`left: ${left.trim().split('\n').join(' ')} ${pvs}`);
        return left.trim() === '' && pvs === '' ? true : undefined;
      },
      CLUSTER_WAIT,
    );
  }, 600_000);
}
