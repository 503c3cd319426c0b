import { API_VERSION } from '../common.ts';

/**
 * Manifests the API server must reject, each with the text a user should see in kubectl's error.
 * Every case starts from a valid object and breaks one thing.
 */
export interface Malformed {
  what: string;
  doc: Record<string, unknown>;
  error: RegExp;
  /** Checked only by the API server (metadata, unknown fields, CEL-only rules), not by the zod schema. */
  celOnly?: boolean;
}

type Obj = Record<string, unknown>;
const holt = (spec: Obj | undefined, name = 'bad-holt'): Obj => ({
  apiVersion: API_VERSION,
  kind: 'Holt',
  metadata: { name },
  ...(spec === undefined ? {} : { spec }),
});
const agentSpec = { holt: 'h', command: ['./run'], bidding: { strategy: 'claim' } };
const agent = (spec: Obj, name = 'bad-agent'): Obj => ({
  apiVersion: API_VERSION,
  kind: 'Agent',
  metadata: { name },
  spec: { ...agentSpec, ...spec },
});
const poolSpec = { holt: 'h', role: 'Coder', target: 'coder' };
const pool = (spec: Obj): Obj => ({
  apiVersion: API_VERSION,
  kind: 'WorkerPool',
  metadata: { name: 'bad-pool' },
  spec: { ...poolSpec, ...spec },
});
const autoscaling = (a: Obj) => pool({ autoscaling: a });

export const MALFORMED: Malformed[] = [
  // A password in a spec is a password for everyone who may read Holts.
  {
    what: 'Holt with a Redis url holding a password',
    doc: holt({ stores: { redis: { mode: 'external', url: 'redis://:s3cret@redis.example:6379' } } }),
    error: /spec\.stores\.redis\.url: .*must not hold a user or password.*urlSecretRef/,
    celOnly: true,
  },
  {
    what: 'Holt with a Postgres url holding a user and password',
    doc: holt({ stores: { postgres: { mode: 'external', url: 'postgres://holt:pw@db:5432/holt' } } }),
    error: /spec\.stores\.postgres\.url: .*must not hold a user or password.*secretName/,
    celOnly: true,
  },
  // Env named like what the runtime sets: a pod would get the name twice (refused at deploy time).
  {
    what: 'Agent env named REDIS_URL',
    doc: agent({ env: [{ name: 'REDIS_URL', value: 'redis://elsewhere' }] }),
    error:
      /spec\.env\[0\]\.name: .*the runtime sets this variable itself \(REDIS_URL, NATS_URL, DATABASE_URL and HOLT_\*\)/,
  },
  {
    what: 'Agent env named HOLT_LLM_API_KEY',
    doc: agent({ env: [{ name: 'HOLT_LLM_API_KEY', secretKeyRef: { name: 's', key: 'k' } }] }),
    error: /spec\.env\[0\]\.name: .*the runtime sets this variable itself/,
  },
  {
    what: 'WorkerPool env named DATABASE_URL',
    doc: pool({ env: [{ name: 'DATABASE_URL', value: 'postgres://x' }] }),
    error: /spec\.env\[0\]\.name: .*the runtime sets this variable itself/,
  },
  {
    what: 'Agent env with a name twice',
    doc: agent({
      env: [
        { name: 'A', value: '1' },
        { name: 'A', value: '2' },
      ],
    }),
    // The API server's message for a list map keyed by name; the zod schema says "env names must be unique".
    error: /spec\.env\[1\]: Duplicate value: \{"name":"A"\}/,
    celOnly: true,
  },
  // Holt
  { what: 'Holt without spec', doc: holt(undefined), error: /spec: Required value/ },
  {
    what: 'orchestrator.replicas as a string',
    doc: holt({ orchestrator: { replicas: 'two' } }),
    error:
      /spec\.orchestrator\.replicas: Invalid value: "string": spec\.orchestrator\.replicas in body must be of type integer/,
  },
  {
    what: 'orchestrator.replicas over 3',
    doc: holt({ orchestrator: { replicas: 5 } }),
    error: /spec\.orchestrator\.replicas: Invalid value: 5: .*should be less than or equal to 3/,
  },
  {
    what: 'negative maxReviewIterations',
    doc: holt({ orchestrator: { maxReviewIterations: -1 } }),
    error: /maxReviewIterations in body should be greater than or equal to 0/,
  },
  {
    what: 'bidTimeoutSeconds of 0',
    doc: holt({ orchestrator: { bidTimeoutSeconds: 0 } }),
    error: /bidTimeoutSeconds in body should be greater than 0/,
  },
  {
    what: 'unknown store mode',
    doc: holt({ stores: { redis: { mode: 'cloud' } } }),
    error: /spec\.stores\.redis\.mode: Unsupported value: "cloud": supported values: "bundled", "external"/,
  },
  {
    what: 'external Redis without a URL',
    doc: holt({ stores: { redis: { mode: 'external' } } }),
    error: /spec\.stores\.redis: .*an external Redis needs url or urlSecretRef/,
  },
  {
    what: 'external NATS without a URL',
    doc: holt({ stores: { nats: { mode: 'external' } } }),
    error: /an external NATS server needs url or urlSecretRef/,
  },
  {
    what: 'external Postgres without a Secret',
    doc: holt({ stores: { postgres: { mode: 'external' } } }),
    error:
      /an external Postgres needs secretName \(a Secret with keys uri host port username password dbname\)/,
  },
  {
    what: 'Postgres users without secretName',
    doc: holt({
      stores: {
        postgres: { mode: 'external', url: 'postgres://db:5432/holt', users: { pup: { secretName: 'pup' } } },
      },
    }),
    error: /spec\.stores\.postgres\.users: .*users need an external Postgres given by secretName/,
  },
  {
    what: 'users of a bundled store',
    doc: holt({ stores: { redis: { users: { pup: { urlSecretRef: { name: 'r', key: 'url' } } } } } }),
    error: /spec\.stores\.redis\.users: .*users are for an external store/,
  },
  {
    what: 'urlSecretRef without key',
    doc: holt({ stores: { redis: { mode: 'external', urlSecretRef: { name: 'redis' } } } }),
    error: /spec\.stores\.redis\.urlSecretRef\.key: Required value/,
  },
  {
    what: 'unknown workspace access mode',
    doc: holt({ workspace: { accessMode: 'ReadOnlyMany' } }),
    error: /spec\.workspace\.accessMode: Unsupported value: "ReadOnlyMany"/,
  },
  {
    what: 'LLM base URL that is not a URL',
    doc: holt({ llm: { baseUrl: 'not a url' } }),
    error: /spec\.llm\.baseUrl: Invalid value: "not a url": spec\.llm\.baseUrl in body must be of type uri/,
  },
  {
    what: 'API key from a Secret and from env',
    doc: holt({ llm: { apiKeyEnv: 'KEY', apiKeySecretRef: { name: 's', key: 'k' } } }),
    error: /set apiKeySecretRef or apiKeyEnv, not both/,
  },
  {
    what: 'misspelt spec field',
    doc: holt({ storez: {} }),
    error: /unknown field "spec\.storez"/,
    celOnly: true,
  },
  {
    what: 'Holt name too long',
    doc: holt({}, 'h'.repeat(41)),
    error: /a Holt name must be at most 40 characters/,
    celOnly: true,
  },
  // Agent
  { what: 'Agent without holt', doc: agent({ holt: undefined }), error: /spec\.holt: Required value/ },
  {
    what: 'holt that is not a name',
    doc: agent({ holt: 'My_Holt' }),
    error: /spec\.holt: Invalid value: "My_Holt": spec\.holt in body should match/,
  },
  {
    what: 'neither command nor llm',
    doc: agent({ command: undefined }),
    error: /spec\.command: Required value: command is required unless llm is set/,
  },
  {
    what: 'bidding with nothing in it',
    doc: agent({ bidding: {} }),
    error: /bidding needs a strategy, a script or llm: true/,
  },
  {
    what: 'Agent without bidding',
    doc: agent({ bidding: undefined }),
    error: /spec\.bidding: Required value/,
  },
  {
    what: 'unknown bid strategy',
    doc: agent({ bidding: { strategy: 'maybe' } }),
    error:
      /spec\.bidding\.strategy: Unsupported value: "maybe": supported values: "review", "claim", "exclusive", "ignore"/,
  },
  {
    what: 'replicas over the cap',
    doc: agent({ replicas: 500 }),
    error: /spec\.replicas: Invalid value: 500: spec\.replicas in body should be less than or equal to 100/,
  },
  {
    what: 'zero replicas',
    doc: agent({ replicas: 0 }),
    error: /spec\.replicas in body should be greater than or equal to 1/,
  },
  {
    what: 'bad role name',
    doc: agent({ role: 'code reviewer!' }),
    error:
      /spec\.role: Invalid value: "code reviewer!": spec\.role in body should match '\^\[A-Za-z0-9-\]\+\$'/,
  },
  {
    what: 'metadata.name that is not a role, without spec.role',
    doc: agent({}, 'agent.v2'),
    error: /metadata\.name is not a valid role \(letters, digits, hyphens\): set spec\.role/,
    celOnly: true,
  },
  {
    what: 'empty command',
    doc: agent({ command: [] }),
    error: /spec\.command in body should have at least 1 items/,
  },
  {
    what: 'command as a string',
    doc: agent({ command: './run.sh' }),
    error: /spec\.command: Invalid value: "string": spec\.command in body must be of type array/,
  },
  {
    what: 'unknown strategy',
    doc: agent({ strategy: 'once' }),
    error: /spec\.strategy: Unsupported value: "once": supported values: "reuse", "fresh_per_call"/,
  },
  {
    what: 'unknown workspace mode',
    doc: agent({ workspace: { mode: 'wr' } }),
    error: /spec\.workspace\.mode: Unsupported value: "wr": supported values: "ro", "rw"/,
  },
  {
    what: 'bad worker target token',
    doc: agent({ replicas: 2, worker: { target: 'code.review' } }),
    error: /spec\.worker\.target: Invalid value: "code\.review": spec\.worker\.target in body should match/,
  },
  {
    what: 'env with value and secretKeyRef',
    doc: agent({ env: [{ name: 'A', value: 'x', secretKeyRef: { name: 's', key: 'k' } }] }),
    error: /spec\.env\[0\]: .*set value or secretKeyRef, not both/,
  },
  {
    what: 'LLM temperature over 2',
    doc: agent({ llm: { temperature: 3 } }),
    error: /spec\.llm\.temperature in body should be less than or equal to 2/,
  },
  {
    what: 'memory recalling more than 20 a turn',
    doc: agent({ llm: { memory: { enabled: true, topK: 50 } } }),
    error: /spec\.llm\.memory\.topK in body should be less than or equal to 20/,
  },
  {
    what: 'memory of an unknown scope',
    doc: agent({ llm: { memory: { enabled: true, scope: 'everyone' } } }),
    error: /spec\.llm\.memory\.scope: Unsupported value: "everyone"/,
  },
  {
    what: 'memory embeddings without a model',
    doc: agent({ llm: { memory: { embeddings: { baseUrl: 'http://e/v1' } } } }),
    error: /spec\.llm\.memory\.embeddings\.model: Required value/,
  },
  {
    what: 'tool name with a space',
    doc: agent({ llm: { tools: [{ name: 'run tests', argv: ['make'] }] } }),
    error: /spec\.llm\.tools\[0\]\.name in body should match/,
  },
  {
    what: 'workerPool on a standard agent',
    doc: agent({ workerPool: 'p' }),
    error: /spec\.workerPool: Invalid value: .*workerPool is only used by scalable agents/,
  },
  {
    what: 'volume with configMap and secret',
    doc: agent({ volumes: [{ name: 'v', mountPath: '/v', configMap: 'c', secret: 's' }] }),
    error: /a volume needs exactly one of configMap or secret/,
  },
  {
    what: 'relative mount path',
    doc: agent({ volumes: [{ name: 'v', mountPath: 'scripts', configMap: 'c' }] }),
    error: /spec\.volumes\[0\]\.mountPath in body should match/,
  },
  {
    what: 'duplicate volume names',
    doc: agent({
      volumes: [
        { name: 'v', mountPath: '/a', configMap: 'a' },
        { name: 'v', mountPath: '/b', configMap: 'b' },
      ],
    }),
    error: /volume names must be unique/,
  },
  // WorkerPool
  {
    what: 'WorkerPool without target',
    doc: pool({ target: undefined }),
    error: /spec\.target: Required value/,
  },
  {
    what: 'bad target token',
    doc: pool({ target: 'Coder.Main' }),
    error:
      /spec\.target: Invalid value: "Coder\.Main": spec\.target in body should match '\^\[a-z0-9_-\]\+\$'/,
  },
  {
    what: 'pool replicas over the hard cap',
    doc: pool({ replicas: 101, autoscaling: { maxReplicas: 100 } }),
    error: /spec\.replicas in body should be less than or equal to 100/,
  },
  {
    what: 'pool replicas over maxReplicas',
    doc: pool({ replicas: 20 }),
    error:
      /spec\.replicas: Invalid value: .*replicas must not exceed autoscaling\.maxReplicas; raise maxReplicas first \(at most 100\)/,
  },
  {
    what: 'minReplicas > maxReplicas',
    doc: autoscaling({ minReplicas: 5, maxReplicas: 2 }),
    error:
      /spec\.autoscaling\.minReplicas: Invalid value: .*autoscaling\.minReplicas must not exceed autoscaling\.maxReplicas/,
  },
  {
    what: 'fallbackReplicas > maxReplicas',
    doc: autoscaling({ fallbackReplicas: 20 }),
    error: /autoscaling\.fallbackReplicas must not exceed autoscaling\.maxReplicas/,
  },
  {
    what: 'maxReplicas over the cap',
    doc: autoscaling({ maxReplicas: 1000 }),
    error: /spec\.autoscaling\.maxReplicas in body should be less than or equal to 100/,
  },
  {
    what: 'unknown autoscaling mode',
    doc: autoscaling({ mode: 'keda' }),
    error: /spec\.autoscaling\.mode: Unsupported value: "keda": supported values: "builtin", "external"/,
  },
  {
    what: 'concurrency as a string',
    doc: pool({ concurrency: 'many' }),
    error: /spec\.concurrency in body must be of type integer/,
  },
  {
    what: 'zero grace period',
    doc: pool({ terminationGracePeriodSeconds: 0 }),
    error: /spec\.terminationGracePeriodSeconds in body should be greater than or equal to 1/,
  },
  {
    what: 'env entry without a name',
    doc: pool({ env: [{ value: 'x' }] }),
    error: /spec\.env\[0\]\.name: Required value/,
  },
];

/** JSON for kubectl's stdin, with `undefined` fields (the broken-by-removal cases) left out. */
export function manifest(m: Malformed): string {
  return JSON.stringify(m.doc);
}
