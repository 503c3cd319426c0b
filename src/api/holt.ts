import { z } from 'zod';
import { resources, secretKeyRef, tokenName } from './common.ts';

const storeBase = {
  mode: z
    .enum(['bundled', 'external'])
    .default('bundled')
    .describe('bundled: the operator runs it (StatefulSet + PVC); external: use an existing server.'),
  image: z.string().min(1).optional().describe('Image of the bundled server (official images by default).'),
  storage: z
    .string()
    .max(32)
    .default('1Gi')
    .describe(
      'PVC size of the bundled server; it can grow (if the StorageClass allows expansion), not shrink.',
    ),
  storageClassName: z
    .string()
    .optional()
    .describe('StorageClass of the bundled PVC (cluster default when omitted); fixed once the store exists.'),
  resources: resources.optional().describe('Resources of the bundled server.'),
};

/** The components that connect to a Holt's stores, each of which may have a user of its own there. */
const componentUsers = <T extends z.ZodType>(ref: T, what: string) =>
  z
    .object({
      orchestrator: ref.optional().describe(`The orchestrator's ${what}.`),
      pup: ref.optional().describe(`The pups' and workers' ${what} (every agent's: one user for all).`),
      operator: ref.optional().describe(`The operator's own ${what} (agent registry and backlog).`),
    })
    .optional();

const urlStore = (what: string) =>
  z
    .object({
      ...storeBase,
      url: z.string().optional().describe(`URL of an external ${what} (external mode; or use urlSecretRef).`),
      urlSecretRef: secretKeyRef.optional().describe(`Secret key holding the URL of an external ${what}.`),
      users: componentUsers(
        z.object({
          urlSecretRef: secretKeyRef.describe("Secret key holding this component's URL (with its user)."),
        }),
        'user',
      ).describe(
        `External mode: a URL per component, each naming a user of its own that the server grants that component's rights (docs/security.md § Residual risks, external stores). A component not named here, and the CLI, use url or urlSecretRef.`,
      ),
    })
    .refine((s) => s.mode !== 'external' || s.url !== undefined || s.urlSecretRef !== undefined, {
      message: `an external ${what} needs url or urlSecretRef`,
    })
    .refine((s) => s.mode === 'external' || s.users === undefined, {
      message: 'users are for an external store (a bundled one makes its own)',
    })
    .default({ mode: 'bundled', storage: '1Gi' })
    .describe(`Where the Holt's ${what} comes from.`);

export const HoltStores = z
  .object({
    redis: urlStore('Redis (the blackboard)'),
    nats: urlStore('NATS server (doorbells and events)'),
    postgres: z
      .object({
        ...storeBase,
        secretName: z
          .string()
          .optional()
          .describe(
            "External mode: a Secret with CloudNativePG's -app keys: uri host port username password dbname.",
          ),
        url: z.string().optional().describe('External mode for local runs: a postgres:// URL.'),
        users: componentUsers(
          z.object({
            secretName: z.string().min(1).describe('Name of the Secret (keys username, password).'),
          }),
          'login role',
        ).describe(
          "External mode: a login role per component, each in a kubernetes.io/basic-auth Secret (keys username, password; the shape of CloudNativePG's managed roles' passwordSecret), reached at the host, port and dbname of secretName. The roles must be named holt_orchestrator, holt_pup and holt_operator and exist before the Holt: the migration, run as secretName's user (the database's owner), grants each its tables and columns, and row-level rules key on holt_pup (docs/security.md § Residual risks, external stores). A component not named here connects as secretName's user.",
        ),
      })
      .refine((s) => s.mode !== 'external' || s.secretName !== undefined || s.url !== undefined, {
        message:
          'an external Postgres needs secretName (a Secret with keys uri host port username password dbname) or url',
      })
      .refine((s) => s.users === undefined || (s.mode === 'external' && s.secretName !== undefined), {
        message: 'users need an external Postgres given by secretName (its host, port and dbname)',
      })
      .default({ mode: 'bundled', storage: '1Gi' })
      .describe("Where the Holt's Postgres (inbox and durable state) comes from."),
    tls: z
      .object({
        secretName: z
          .string()
          .min(1)
          .describe(
            "A Secret in cert-manager's format (tls.crt, tls.key, ca.crt) whose certificate names <holt>-redis, <holt>-nats and <holt>-postgres with their .<namespace>.svc forms.",
          ),
      })
      .optional()
      .describe(
        'TLS for the bundled stores: they serve only TLS (Postgres also plain on its socket), and every component verifies them against ca.crt.',
      ),
  })
  .default({
    redis: { mode: 'bundled', storage: '1Gi' },
    nats: { mode: 'bundled', storage: '1Gi' },
    postgres: { mode: 'bundled', storage: '1Gi' },
  })
  .describe('The three stores a Holt needs.');

export const HoltOrchestrator = z
  .object({
    maxReviewIterations: z
      .number()
      .int()
      .min(0)
      .default(3)
      .describe('Reworks allowed after rejecting reviews; 0 = unlimited.'),
    bidTimeoutSeconds: z
      .number()
      .positive()
      .max(3600)
      .default(30)
      .describe(
        "Missing bids count as ignore after this many seconds: every bidder's window at first, and its narrowest.",
      ),
    maxBidTimeoutSeconds: z
      .number()
      .positive()
      .max(14400)
      .optional()
      .describe(
        "The widest a bidder's own bid window may grow: each late bid widens that agent's window to 1.5 × its latency, up to this; bids in time narrow it slowly back. Default 4 × bidTimeoutSeconds; equal to bidTimeoutSeconds turns the adaptation off; below it the Holt is invalid (Degraded).",
      ),
    replicas: z
      .number()
      .int()
      .min(1)
      .max(3)
      .default(1)
      .describe('Orchestrator pods; one is active (leased), the others stand by.'),
    retentionDays: z
      .number()
      .min(0)
      .default(7)
      .describe(
        'Finished work older than this many days is pruned: whole finished workflows from Redis (artefacts, claims, bids), turns with their steps, inbox rows and LLM usage rows from Postgres; 0 keeps everything. Budget windows must be shorter; usage totals are kept. status.data.retention shows what it removed.',
      ),
    image: z
      .string()
      .optional()
      .describe('Runtime image of the orchestrator (operator default when omitted).'),
    resources: resources
      .optional()
      .describe(
        'Resources of the orchestrator pods (default: requests cpu 50m, memory 128Mi; a memory limit of 512Mi, no CPU limit). At its top rate it needs about 1.4 cores: its event loop plus the V8 garbage-collector threads beside it; a CPU limit of 1 makes it, not Redis, the bound (docs/benchmarks.md).',
      ),
  })
  .refine((o) => o.maxBidTimeoutSeconds === undefined || o.maxBidTimeoutSeconds >= o.bidTimeoutSeconds, {
    path: ['maxBidTimeoutSeconds'],
    message: 'must be at least bidTimeoutSeconds',
  })
  .default({ maxReviewIterations: 3, bidTimeoutSeconds: 30, replicas: 1, retentionDays: 7 })
  .describe('Orchestrator settings and policy.');

export const HoltLlm = z
  .object({
    baseUrl: z.url().optional().describe('Default OpenAI-compatible endpoint of the Holt.'),
    model: z.string().optional().describe('Default model.'),
    apiKeySecretRef: secretKeyRef.optional().describe('Secret key holding the API key (never logged).'),
    apiKeyEnv: z.string().optional().describe('Local mode: environment variable holding the API key.'),
  })
  .refine((l) => l.apiKeySecretRef === undefined || l.apiKeyEnv === undefined, {
    message: 'set apiKeySecretRef or apiKeyEnv, not both',
  })
  .optional()
  .describe('Default LLM endpoint and model for LLM agents.');

export const HoltWorkspace = z
  .object({
    size: z.string().default('1Gi').describe('Size of the workspace PVC.'),
    storageClassName: z.string().optional().describe('StorageClass of the workspace PVC.'),
    accessMode: z
      .enum(['ReadWriteOnce', 'ReadWriteMany'])
      .default('ReadWriteOnce')
      .describe('Access mode of the workspace PVC.'),
    gitUrl: z
      .string()
      .min(1)
      .optional()
      .describe(
        'Seed the workspace by cloning this Git URL once, before the agents start (a workspace that is already a repository is left alone).',
      ),
    gitSecretRef: z
      .object({ name: z.string().min(1).describe('Secret name.') })
      .optional()
      .describe(
        'Credentials for gitUrl over HTTPS: a Secret with keys username and password (a token); given to git through GIT_ASKPASS, never in the URL.',
      ),
    path: z
      .string()
      .optional()
      .describe('Local mode: the workspace directory (the Holt file directory by default).'),
  })
  .default({ size: '1Gi', accessMode: 'ReadWriteOnce' })
  .describe('The shared workspace the agents work in.');

export const HoltMonitoring = z
  .object({
    podMonitor: z
      .boolean()
      .default(false)
      .describe(
        "A Prometheus Operator PodMonitor for the Holt's orchestrator and agent pods (needs the monitoring.coreos.com CRDs; the chart's alerts and dashboard read it).",
      ),
    interval: z
      .string()
      .regex(/^[0-9]+(ms|s|m|h)$/, 'must be a duration such as 30s')
      .default('30s')
      .describe('How often Prometheus scrapes the pods.'),
    labels: z
      .record(z.string(), z.string())
      .default({})
      .describe('Extra labels on the PodMonitor, such as the one your Prometheus selects PodMonitors by.'),
  })
  .default({ podMonitor: false, interval: '30s', labels: {} })
  .describe('Metrics scraping of the Holt (docs/metrics.md).');

export const HoltConsoleToken = z.object({
  name: tokenName.describe('Token name (in the orchestrator log line of each sign-in).'),
  access: z
    .enum(['read', 'act'])
    .default('read')
    .describe(
      'read: look only; act: an operator, who may also answer questions, approve calls and cancel tasks.',
    ),
  secretName: z
    .string()
    .optional()
    .describe(
      'A Secret of yours holding the token under the key `token` (never changed by the operator). Without it the operator makes `<holt>-console-<name>` with a random token; delete that Secret to revoke the token (a new one is made in its place).',
    ),
});
export type HoltConsoleToken = z.infer<typeof HoltConsoleToken>;

export const HoltConsole = z
  .object({
    enabled: z
      .boolean()
      .default(false)
      .describe(
        "Serve the console (docs/console.md) at /console on the orchestrator's ingress port, exposed with the agents' ingress; a browser signs in with one of its tokens.",
      ),
    tokens: z
      .array(HoltConsoleToken)
      .max(50)
      .default([{ name: 'operator', access: 'act' }])
      .refine((ts) => new Set(ts.map((t) => t.name)).size === ts.length, 'token names must be unique')
      .describe('Who may sign in (default: one token `operator` that may act).'),
    tracesUrl: z
      .url({ error: 'must be a URL' })
      .optional()
      .describe("A trace viewer's base URL (Jaeger's UI): a workflow's trace id links to <url>/trace/<id>."),
  })
  .default({ enabled: false, tokens: [{ name: 'operator', access: 'act' }] })
  .describe('The console of the Holt, served by its orchestrator (docs/console.md § On a cluster).');

export const HoltIngress = z
  .object({
    expose: z
      .enum(['none', 'Ingress', 'Gateway'])
      .default('none')
      .describe(
        "Expose the living agents' ingress (the orchestrator's ingress port, paths /v1/agents and /a2a, and /console when it is enabled) outside the cluster: an Ingress, or a Gateway API HTTPRoute.",
      ),
    host: z.string().optional().describe('Host name the Ingress or HTTPRoute answers for.'),
    className: z.string().optional().describe('ingressClassName of the Ingress.'),
    tlsSecretName: z.string().optional().describe("TLS certificate Secret of the Ingress's host."),
    gateway: z
      .object({
        name: z.string().min(1).describe('Name of the Gateway.'),
        namespace: z.string().optional().describe("Its namespace (default: the Holt's)."),
        sectionName: z.string().optional().describe('The listener of the Gateway to attach to.'),
      })
      .optional()
      .describe('The Gateway the HTTPRoute attaches to (expose: Gateway).'),
    allowFrom: z
      .array(z.string())
      .default(['0.0.0.0/0', '::/0'])
      .describe(
        'Addresses the NetworkPolicy admits to the ingress port (pods of any namespace are admitted too: ingress controllers and gateways run in-cluster). Nothing else of the orchestrator is reachable.',
      ),
    console: HoltConsole,
  })
  .refine((i) => i.expose !== 'Gateway' || i.gateway !== undefined, {
    message: 'expose: Gateway needs gateway.name (the Gateway the HTTPRoute attaches to)',
    path: ['gateway'],
  })
  .default({
    expose: 'none',
    allowFrom: ['0.0.0.0/0', '::/0'],
    console: { enabled: false, tokens: [{ name: 'operator', access: 'act' }] },
  })
  .describe(
    "How the living agents' ingress is reached (it is served once an Agent enables spec.ingress, or the console is enabled).",
  );

export const HoltTracing = z
  .object({
    endpoint: z
      .url({ error: 'must be a URL' })
      .optional()
      .describe(
        "OTLP/HTTP base URL of a trace collector (e.g. http://jaeger-collector.observability:4318) for the Holt's orchestrator and pups; unset: no trace is exported.",
      ),
    samplerRatio: z
      .number()
      .min(0)
      .max(1)
      .default(1)
      .describe('The share of new traces kept, 0 to 1 (a span whose parent was kept is always kept).'),
    headersSecretRef: secretKeyRef
      .optional()
      .describe(
        'A Secret key holding the export headers (key=value,…; a collector token): given to the pups and the orchestrator only, never to a tool.',
      ),
    contentChars: z
      .number()
      .int()
      .min(0)
      .max(65536)
      .default(0)
      .describe('Model messages on chat spans, capped at this many characters; 0: never.'),
  })
  .default({ samplerRatio: 1, contentChars: 0 })
  .describe('Traces of the Holt (docs/observability.md).');

export const HoltSpec = z.object({
  ingress: HoltIngress,
  stores: HoltStores,
  orchestrator: HoltOrchestrator,
  llm: HoltLlm,
  workspace: HoltWorkspace,
  monitoring: HoltMonitoring,
  tracing: HoltTracing,
  runtimeImage: z
    .string()
    .optional()
    .describe('Image with the orchestrator and the pup (operator default when omitted).'),
});
export type HoltSpec = z.infer<typeof HoltSpec>;
