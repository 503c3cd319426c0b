import { z } from 'zod';
import { argv, envList, holtName, MAX_REPLICAS, resources, roleName, workerTarget } from './common.ts';

export const Autoscaling = z
  .object({
    mode: z
      .enum(['builtin', 'external'])
      .default('builtin')
      .describe(
        'builtin: the operator writes spec.replicas from the backlog; external: an HPA, KEDA or a person does.',
      ),
    minReplicas: z
      .number()
      .int()
      .min(0)
      .max(MAX_REPLICAS)
      .default(0)
      .describe('Lowest replica count (0 allows scale to zero).'),
    maxReplicas: z.number().int().min(1).max(MAX_REPLICAS).default(10).describe('Hard maximum.'),
    activationBacklog: z
      .number()
      .int()
      .min(0)
      .default(0)
      .describe('Scale 0->1 when the backlog exceeds this.'),
    targetBacklogPerReplica: z
      .number()
      .int()
      .min(1)
      .default(1)
      .describe('Desired backlog per replica for 1<->N.'),
    cooldownSeconds: z
      .number()
      .int()
      .min(0)
      .default(300)
      .describe('Idle time before scaling to zero (only towards zero).'),
    stabilizationSeconds: z
      .number()
      .int()
      .min(0)
      .default(60)
      .describe('Scale in only to the highest recommendation of this window.'),
    fallbackReplicas: z
      .number()
      .int()
      .min(0)
      .max(MAX_REPLICAS)
      .optional()
      .describe('Replicas to hold while the backlog cannot be read.'),
    fallbackAfterFailures: z
      .number()
      .int()
      .min(1)
      .default(3)
      .describe('Failed backlog reads before the fallback applies.'),
  })
  .default({
    mode: 'builtin',
    minReplicas: 0,
    maxReplicas: 10,
    activationBacklog: 0,
    targetBacklogPerReplica: 1,
    cooldownSeconds: 300,
    stabilizationSeconds: 60,
    fallbackAfterFailures: 3,
  })
  .describe('How spec.replicas is driven.');

export const WorkerPoolSpec = z
  .object({
    holt: holtName.describe('Name of the Holt this pool belongs to.'),
    role: roleName.describe('Agent role whose claims these workers execute.'),
    target: workerTarget,
    replicas: z
      .number()
      .int()
      .min(0)
      .max(MAX_REPLICAS)
      .optional()
      .describe('Desired workers (the scale subresource).'),
    concurrency: z.number().int().min(1).max(64).default(1).describe('Claims one worker runs at once.'),
    image: z.string().min(1).optional().describe('Worker image (defaults to the agent image).'),
    command: argv.optional().describe('Tool argv (defaults to the agent command).'),
    env: envList.describe('Extra environment of the workers.'),
    resources: resources.optional(),
    terminationGracePeriodSeconds: z
      .number()
      .int()
      .min(1)
      .max(3600)
      .default(60)
      .describe('Drain time on scale-in.'),
    autoscaling: Autoscaling,
  })
  // The same cross-field rules as the CRD's CEL (src/api/crd/rules.ts).
  .superRefine((p, ctx) => {
    const max = p.autoscaling.maxReplicas;
    const over = (path: (string | number)[], message: string) =>
      ctx.addIssue({ code: 'custom', path, message });
    if (p.autoscaling.minReplicas > max)
      over(['autoscaling', 'minReplicas'], 'autoscaling.minReplicas must not exceed autoscaling.maxReplicas');
    if (p.autoscaling.fallbackReplicas !== undefined && p.autoscaling.fallbackReplicas > max)
      over(
        ['autoscaling', 'fallbackReplicas'],
        'autoscaling.fallbackReplicas must not exceed autoscaling.maxReplicas',
      );
    if (p.replicas !== undefined && p.replicas > max)
      over(['replicas'], 'replicas must not exceed autoscaling.maxReplicas');
  });
export type WorkerPoolSpec = z.infer<typeof WorkerPoolSpec>;
