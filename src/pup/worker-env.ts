import { z } from 'zod';
import { ConfigError, envMs, formatIssues } from '../common/config.ts';

// An inbox worker's settings, apart from the worker itself: a pup reads them before it decides to load
// the inbox (Postgres, NATS), which a bidding pup never does.

const blank = (v: unknown) => (v === '' ? undefined : v);

/** The worker's own settings (besides the pup's): where the inbox is, which target, how many at once. */
export const WorkerEnv = z.object({
  DATABASE_URL: z
    .string({ error: 'is required for an inbox worker' })
    .regex(/^postgres(ql)?:\/\//, 'must be a postgres:// URL'),
  NATS_URL: z
    .string({ error: 'is required for an inbox worker' })
    .regex(/^(nats|tls):\/\//, 'must be a nats:// URL'),
  HOLT_WORKER_TARGET: z.preprocess(
    blank,
    z
      .string()
      .regex(/^[a-z0-9_-]+$/, 'must be one NATS subject token of [a-z0-9_-]')
      .optional(),
  ),
  HOLT_WORKER_CONCURRENCY: z.preprocess(blank, z.coerce.number().int().min(1).max(256).default(1)),
  HOLT_WORKER_LEASE_MS: envMs(30_000),
  /**
   * The pod's name (the downward API sets it in Kubernetes): the worker's lease_owner, so the
   * autoscaler can tell busy pods (holding a lease) from idle ones before a scale-in.
   */
  HOLT_POD_NAME: z.preprocess(blank, z.string().min(1).max(253).optional()),
});
export type WorkerEnv = z.infer<typeof WorkerEnv>;

export function loadWorkerEnv(env: NodeJS.ProcessEnv): WorkerEnv {
  const r = WorkerEnv.safeParse(env);
  if (!r.success) throw new ConfigError(formatIssues(r.error));
  return r.data;
}

/** The inbox lease_owner of this worker: the pod name when set, else the worker's own unique id. */
export const leaseOwnerOf = (env: WorkerEnv): string | undefined => env.HOLT_POD_NAME;
