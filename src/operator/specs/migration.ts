import type { V1EnvVar } from '@kubernetes/client-node';
import { PG_COMPONENTS, PG_ROLE, pgPasswordEnv } from '../../access/pg-roles.ts';
import type { HoltSpec } from '../../api/holt.ts';
import { hashOf } from '../kube/apply.ts';
import type { KubeObject } from '../kube/kube.ts';
import { childName, labels, meta, type Owner } from './meta.ts';
import { containerSecurity, podSecurity, RUNTIME_UID } from './pod.ts';
import { orchestratorAccount } from './serviceaccount.ts';
import { pgPasswordKey, storeEnv, storeSecretName, storeTlsClient } from './stores.ts';

/**
 * Bundled Postgres: the Job first makes the owner's and each component's role (idempotent, every run, so an upgrade that adds
 * grants applies them) with the superuser's URL, then migrates as the schema's owner.
 */
function roleSetupEnv(holt: string, spec: HoltSpec): V1EnvVar[] {
  const users = spec.stores.postgres.users;
  if (spec.stores.postgres.mode !== 'bundled') {
    // External with a role per component: the platform made them; the Job waits for them to exist
    // (and its name changes with them, so naming another re-runs the grants).
    const roles = PG_COMPONENTS.filter((c) => users?.[c]).map((c) => PG_ROLE[c]);
    return roles.length ? [{ name: 'HOLT_DATABASE_ROLES', value: roles.join(',') }] : [];
  }
  const secret = storeSecretName(holt, 'postgres');
  const ref = (name: string, key: string): V1EnvVar => ({
    name,
    valueFrom: { secretKeyRef: { name: secret, key } },
  });
  return [
    ref('HOLT_DATABASE_ADMIN_URL', 'uri'),
    ref('HOLT_DATABASE_OWNER_PASSWORD', 'owner-password'),
    ...PG_COMPONENTS.map((c) => ref(pgPasswordEnv(c), pgPasswordKey(c))),
  ];
}

/**
 * The migration Job for the Holt's Postgres. A Job's template is immutable, so its name carries a
 * hash of image and database source: a new runtime version runs its migrations in a new Job.
 * It has no ttlSecondsAfterFinished: the finished Job is the record that this hash was applied
 * (Holt status reads it), and a Job collected by TTL would be re-created and re-run by the next
 * reconcile (writes in steady state). Old Jobs are pruned when the hash changes.
 */
export function migrationJob(owner: Owner, spec: HoltSpec, runtimeImage: string): KubeObject {
  const image = spec.runtimeImage ?? runtimeImage;
  const tls = storeTlsClient(spec.stores);
  const env = [
    ...storeEnv(owner.name, spec.stores, 'migrate'),
    ...roleSetupEnv(owner.name, spec),
    ...tls.env,
  ];
  const name = childName(owner.name, 'migrate', hashOf({ image, env }).slice(0, 8));
  const lbls = labels(owner.name, childName(owner.name, 'migrate'), 'migration');
  return {
    apiVersion: 'batch/v1',
    kind: 'Job',
    metadata: meta(name, owner, lbls),
    spec: {
      backoffLimit: 10,
      template: {
        metadata: { labels: lbls },
        spec: {
          restartPolicy: 'OnFailure',
          serviceAccountName: orchestratorAccount(owner.name),
          automountServiceAccountToken: false,
          securityContext: podSecurity(RUNTIME_UID),
          containers: [
            {
              name: 'migrate',
              image,
              args: ['migrate'],
              env,
              resources: { requests: { cpu: '20m', memory: '64Mi' } },
              securityContext: containerSecurity(),
              // Only with TLS: a Job's template is immutable, so nothing changes for the others.
              ...(tls.mounts.length ? { volumeMounts: tls.mounts } : {}),
            },
          ],
          ...(tls.volumes.length ? { volumes: tls.volumes } : {}),
        },
      },
    },
  };
}
