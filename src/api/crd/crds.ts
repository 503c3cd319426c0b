import type { V1CustomResourceDefinition, V1CustomResourceDefinitionVersion } from '@kubernetes/client-node';
import type { z } from 'zod';
import { AgentResourceSpec } from '../agent.ts';
import { CRD_VERSION, GROUP } from '../common.ts';
import { HoltSpec } from '../holt.ts';
import { AgentStatus, HoltStatus, ToolServerStatus, WorkerPoolStatus } from '../status.ts';
import { ToolServerSpec } from '../toolserver.ts';
import { WorkerPoolSpec } from '../workerpool.ts';
import { agentRules, holtRules, type RuleSet, toolServerRules, workerPoolRules } from './rules.ts';
import { at, type JSONSchemaProps, toStructural } from './schema.ts';

interface Kind {
  kind: string;
  plural: string;
  shortNames: string[];
  description: string;
  spec: z.ZodType;
  status: z.ZodType;
  rules: RuleSet;
  columns: NonNullable<V1CustomResourceDefinitionVersion['additionalPrinterColumns']>;
  scale?: boolean;
}

const age = { name: 'Age', type: 'date', jsonPath: '.metadata.creationTimestamp' };
const ready = { name: 'Ready', type: 'string', jsonPath: '.status.conditions[?(@.type=="Ready")].status' };
const reason = {
  name: 'Reason',
  type: 'string',
  jsonPath: '.status.conditions[?(@.type=="Ready")].reason',
  priority: 1,
};

export const KINDS: Kind[] = [
  {
    kind: 'Holt',
    plural: 'holts',
    shortNames: [],
    description:
      'A Holt: a blackboard (Redis), doorbells (NATS), an inbox (Postgres), a shared workspace and an orchestrator, which the Agents that name it cooperate through.',
    spec: HoltSpec,
    status: HoltStatus,
    rules: holtRules,
    columns: [
      { name: 'Phase', type: 'string', jsonPath: '.status.phase' },
      ready,
      { name: 'Agents', type: 'integer', jsonPath: '.status.agents.total' },
      { name: 'Agents-Ready', type: 'integer', jsonPath: '.status.agents.ready', priority: 1 },
      reason,
      age,
    ],
  },
  {
    kind: 'Agent',
    plural: 'agents',
    shortNames: ['hagent'],
    description:
      'An agent of a Holt: bids on claims and runs its command (or a model loop) in a pup; scalable agents execute through a WorkerPool.',
    spec: AgentResourceSpec,
    status: AgentStatus,
    rules: agentRules,
    columns: [
      { name: 'Holt', type: 'string', jsonPath: '.spec.holt', priority: 1 },
      { name: 'Role', type: 'string', jsonPath: '.status.role' },
      { name: 'Replicas', type: 'integer', jsonPath: '.spec.replicas' },
      { name: 'Ready', type: 'integer', jsonPath: '.status.readyReplicas' },
      { name: 'In-Flight', type: 'integer', jsonPath: '.status.claimsInFlight' },
      reason,
      age,
    ],
  },
  {
    kind: 'WorkerPool',
    plural: 'workerpools',
    shortNames: ['wp'],
    description:
      'Inbox workers for one worker target of a Holt. spec.replicas is the scale subresource: the built-in autoscaler, an HPA, KEDA or kubectl scale drive it (whoever owns it is its only writer).',
    spec: WorkerPoolSpec,
    status: WorkerPoolStatus,
    rules: workerPoolRules,
    columns: [
      { name: 'Target', type: 'string', jsonPath: '.spec.target' },
      { name: 'Replicas', type: 'integer', jsonPath: '.status.replicas' },
      { name: 'Desired', type: 'integer', jsonPath: '.status.desiredReplicas' },
      { name: 'Backlog', type: 'integer', jsonPath: '.status.backlog' },
      { name: 'Mode', type: 'string', jsonPath: '.spec.autoscaling.mode', priority: 1 },
      age,
    ],
    scale: true,
  },
  {
    kind: 'ToolServer',
    plural: 'toolservers',
    shortNames: ['ts'],
    description:
      "An MCP server the Agents of its namespace reference by name (spec.llm.toolServers): a stdio server in an image (run behind holt mcp-bridge), an image serving Streamable HTTP, or an external url. The operator deploys it, admits only its Agents' pods, and lists its tools in status.",
    spec: ToolServerSpec,
    status: ToolServerStatus,
    rules: toolServerRules,
    columns: [{ name: 'URL', type: 'string', jsonPath: '.status.url', priority: 1 }, ready, reason, age],
  },
];

function openAPISchema(k: Kind): JSONSchemaProps {
  const spec = toStructural(k.spec);
  spec.description = `Desired state of the ${k.kind}.`;
  const status = toStructural(k.status);
  // metav1.Condition lists are maps keyed by type (server-side apply merges them per condition).
  const conds = status.properties?.conditions;
  if (conds)
    Object.assign(conds, { 'x-kubernetes-list-type': 'map', 'x-kubernetes-list-map-keys': ['type'] });
  // Env lists are maps keyed by name, as a pod's are: the API server refuses a name given twice.
  const env = spec.properties?.env;
  if (env) Object.assign(env, { 'x-kubernetes-list-type': 'map', 'x-kubernetes-list-map-keys': ['name'] });
  const root: JSONSchemaProps = {
    type: 'object',
    description: k.description,
    properties: {
      apiVersion: {
        type: 'string',
        description: `${GROUP}/${CRD_VERSION}: the versioned schema of this representation of an object.`,
      },
      kind: { type: 'string', description: `${k.kind}: the REST resource this object represents.` },
      // The API server owns metadata's schema and refuses a description here.
      metadata: { type: 'object' },
      spec,
      status,
    },
    required: ['spec'],
  };
  for (const [path, rules] of Object.entries(k.rules)) {
    const node = at(root, path);
    node['x-kubernetes-validations'] = [...(node['x-kubernetes-validations'] ?? []), ...rules];
  }
  return root;
}

export function crdOf(k: Kind): V1CustomResourceDefinition {
  return {
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: { name: `${k.plural}.${GROUP}` },
    spec: {
      group: GROUP,
      scope: 'Namespaced',
      names: {
        kind: k.kind,
        listKind: `${k.kind}List`,
        plural: k.plural,
        singular: k.kind.toLowerCase(),
        ...(k.shortNames.length ? { shortNames: k.shortNames } : {}),
        categories: ['holt-all'],
      },
      versions: [
        {
          name: CRD_VERSION,
          served: true,
          storage: true,
          schema: { openAPIV3Schema: openAPISchema(k) as never },
          subresources: {
            status: {},
            ...(k.scale
              ? {
                  scale: {
                    specReplicasPath: '.spec.replicas',
                    statusReplicasPath: '.status.replicas',
                    labelSelectorPath: '.status.selector',
                  },
                }
              : {}),
          },
          additionalPrinterColumns: k.columns,
        },
      ],
    },
  };
}
