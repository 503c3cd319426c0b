import { z } from 'zod';
import { BidType } from '../blackboard/types.ts';
import { VERSION as RELEASE } from '../common/version.ts';

/** API group and version of every holt.io resource. */
export const GROUP = 'holt.io';
/** The version of the custom resources (not the release: that is src/common/version.ts). */
export const CRD_VERSION = 'v1alpha1';
export const API_VERSION = `${GROUP}/${CRD_VERSION}`;

/** The runtime image (orchestrator + pup; images/runtime.Dockerfile) the operator and the samples use. */
export const DEFAULT_RUNTIME_IMAGE = `ghcr.io/holt-k8s/runtime:${RELEASE}`;

/** Hard cap on replicas of any agent or pool: a typo must not start a thousand pods. */
export const MAX_REPLICAS = 100;

/** A DNS-1123 label (Service, volume and container names). */
export const dnsLabel = z
  .string()
  .min(1)
  .max(63)
  .regex(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/, 'must be a DNS label: lower-case letters, digits and hyphens');

/**
 * A token's name in a spec (an Agent's ingress tokens, a Holt's console tokens): a DNS label short enough
 * that the Secret the operator makes for it, `<owner>-<kind>-<name>`, stays a valid name.
 */
export const tokenName = z
  .string()
  .regex(/^[a-z0-9]([-a-z0-9]{0,30}[a-z0-9])?$/, 'a token name is a DNS label of at most 32');

/** Reference to a Holt by name: a DNS-1123 subdomain, as metadata.name is. */
export const holtName = z
  .string()
  .min(1)
  .max(253)
  .regex(
    /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/,
    'must be the name of a Holt: lower-case letters, digits, "-" and "."',
  )
  .describe('Name of a Holt in the same namespace.');

export const roleName = z
  .string()
  .min(1)
  .max(64)
  .regex(/^[A-Za-z0-9-]+$/, 'role must be 1-64 characters of letters, digits and hyphens')
  // A person's artefacts say produced_by_role: user (only a person's Answer approves a risky call), the
  // orchestrator's say orchestrator: no agent may write under either name.
  .refine((r) => r !== 'user' && r !== 'orchestrator', 'user and orchestrator are reserved role names')
  .describe('The agent role: 1-64 letters, digits or hyphens. Unique within a Holt.');

export { workerTarget } from '../blackboard/targets.ts';

export const argv = z.array(z.string()).min(1, 'must be a non-empty list of strings');

export const workspaceMode = z
  .enum(['ro', 'rw'])
  .describe('How the workspace is mounted: ro (read-only) or rw.');

export const secretKeyRef = z
  .object({
    name: z.string().min(1).describe('Name of a Secret in the same namespace.'),
    key: z.string().min(1).describe('Key inside the Secret.'),
  })
  .describe('A key of a Secret in the same namespace.');

/** The variables the runtime sets itself: the stores' URLs (one writer: the operator's storeEnv). */
export const STORE_URL_ENV = { redis: 'REDIS_URL', nats: 'NATS_URL', postgres: 'DATABASE_URL' } as const;
/** ...and everything named HOLT_* (the pup's settings, the LLM key, the pod name). */
export const RUNTIME_ENV_PREFIX = 'HOLT_';
export const RESERVED_ENV_MESSAGE = `the runtime sets this variable itself (${Object.values(STORE_URL_ENV).join(', ')} and ${RUNTIME_ENV_PREFIX}*): choose another name`;

export function isReservedEnvName(name: string): boolean {
  return name.startsWith(RUNTIME_ENV_PREFIX) || (Object.values(STORE_URL_ENV) as string[]).includes(name);
}

export const envVar = z
  .object({
    name: z.string().min(1).max(253).describe('Environment variable name.'),
    value: z.string().optional().describe('Literal value.'),
    secretKeyRef: secretKeyRef.optional().describe('Take the value from a Secret key instead.'),
  })
  .refine((e) => e.value === undefined || e.secretKeyRef === undefined, {
    message: 'set value or secretKeyRef, not both',
  })
  .refine((e) => !isReservedEnvName(e.name), { path: ['name'], message: RESERVED_ENV_MESSAGE })
  .describe('One environment variable for the agent process.');

/** An env list: each name once (a pod refuses a name twice; the CRDs make it a map keyed by name). */
export const envList = z
  .array(envVar)
  .default([])
  .refine((l) => new Set(l.map((e) => e.name)).size === l.length, { message: 'env names must be unique' });

export const resources = z
  .object({
    requests: z
      .record(z.string(), z.string())
      .optional()
      .describe('Minimum resources, e.g. {cpu: 100m, memory: 128Mi}.'),
    limits: z
      .record(z.string(), z.string())
      .optional()
      .describe('Maximum resources, e.g. {cpu: "1", memory: 512Mi}.'),
  })
  .describe('Compute resources of each pod (Kubernetes ResourceRequirements).');

export { BidType };
