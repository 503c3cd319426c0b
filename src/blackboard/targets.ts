import { z } from 'zod';

/**
 * Worker targets: the queue a grant of a scalable role goes to (a NATS subject token and the inbox
 * rows' `worker_target`). A protocol piece that the bus, the inbox, living agents, the pup, the API
 * and the operator all speak, so it lives here, below them all.
 */
export const workerTarget = z
  .string()
  .min(1)
  .max(63)
  .regex(/^[a-z0-9_-]+$/, 'worker target must be one NATS subject token of [a-z0-9_-]')
  .describe(
    'Worker target: a single NATS subject token ([a-z0-9_-]). Targets starting with svc1_ have exactly one consumer.',
  );

/** A role's own worker target when it names none: the role, lower-cased, other characters as `-`. */
export const targetOfRole = (role: string): string => role.toLowerCase().replace(/[^a-z0-9_-]/g, '-');
