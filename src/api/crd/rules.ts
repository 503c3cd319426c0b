import { MAX_REPLICAS, RESERVED_ENV_MESSAGE, RUNTIME_ENV_PREFIX, STORE_URL_ENV } from '../common.ts';
import type { ValidationRule } from './schema.ts';

/**
 * CEL rules (x-kubernetes-validations) for what spans fields, keyed by the schema path they sit on
 * (relative to the resource root). Each mirrors a zod refinement or a runtime rule; messages say
 * what to change, since they are what the user sees from kubectl.
 */
export type RuleSet = Record<string, ValidationRule[]>;

const externalStore = (what: string): ValidationRule => ({
  rule: "self.mode != 'external' || has(self.url) || has(self.urlSecretRef)",
  message: `an external ${what} needs url or urlSecretRef`,
});

const usersExternal: ValidationRule = {
  rule: "self.mode == 'external' || !has(self.users)",
  message: 'users are for an external store (a bundled one makes its own)',
  fieldPath: '.users',
};

/**
 * A bundled store's PVC size must be a quantity. Whether a change can be made (grow: yes; shrink or
 * another class: no) is the operator's to say, in the Holt's status: a rule here would also stop a
 * user from going back to the size that works after a resize the StorageClass refused.
 */
const storeVolume: ValidationRule[] = [
  {
    rule: '!has(self.storage) || isQuantity(self.storage)',
    message: 'storage must be a quantity such as 1Gi',
    fieldPath: '.storage',
  },
];

/** A URL in a spec is readable by anyone who can read the Holt: its credentials belong in a Secret. */
const noCredentialsInUrl = (ref: string): ValidationRule => ({
  rule: "!has(self.url) || !self.url.matches('^[A-Za-z][A-Za-z0-9+.-]*://[^/?#]*@')",
  message: `url must not hold a user or password (anyone who can read the Holt reads them): put the URL in a Secret and use ${ref}`,
  fieldPath: '.url',
});

const envVarRules: ValidationRule[] = [
  { rule: '!(has(self.value) && has(self.secretKeyRef))', message: 'set value or secretKeyRef, not both' },
  {
    rule: `!self.name.startsWith('${RUNTIME_ENV_PREFIX}') && !(self.name in [${Object.values(STORE_URL_ENV)
      .map((n) => `'${n}'`)
      .join(', ')}])`,
    message: RESERVED_ENV_MESSAGE,
    fieldPath: '.name',
  },
];

export const holtRules: RuleSet = {
  '': [
    {
      rule: 'size(self.metadata.name) <= 40',
      message: 'a Holt name must be at most 40 characters (the names of its components add suffixes)',
    },
  ],
  'spec.stores.redis': [
    externalStore('Redis'),
    ...storeVolume,
    noCredentialsInUrl('urlSecretRef'),
    usersExternal,
  ],
  'spec.stores.nats': [
    externalStore('NATS server'),
    ...storeVolume,
    noCredentialsInUrl('urlSecretRef'),
    usersExternal,
  ],
  'spec.stores.postgres': [
    ...storeVolume,
    noCredentialsInUrl('secretName'),
    {
      rule: "self.mode != 'external' || has(self.secretName) || has(self.url)",
      message:
        'an external Postgres needs secretName (a Secret with keys uri host port username password dbname) or url',
    },
    {
      rule: "!has(self.users) || (self.mode == 'external' && has(self.secretName))",
      message: 'users need an external Postgres given by secretName (its host, port and dbname)',
      fieldPath: '.users',
    },
  ],
  'spec.llm': [
    {
      rule: '!(has(self.apiKeySecretRef) && has(self.apiKeyEnv))',
      message: 'set apiKeySecretRef or apiKeyEnv, not both',
    },
  ],
};

export const agentRules: RuleSet = {
  '': [
    {
      rule: 'size(self.metadata.name) <= 50',
      message: 'an Agent name must be at most 50 characters (its workloads add suffixes)',
    },
    {
      rule: "has(self.spec.role) || self.metadata.name.matches('^[A-Za-z0-9-]{1,64}$')",
      message: 'metadata.name is not a valid role (letters, digits, hyphens): set spec.role',
    },
  ],
  spec: [
    {
      rule: 'has(self.command) || has(self.llm)',
      message: 'command is required unless llm is set',
      fieldPath: '.command',
      reason: 'FieldValueRequired',
    },
    {
      rule: "!has(self.workerPool) || self.replicas > 1 || self.strategy == 'fresh_per_call' || has(self.worker)",
      message: 'workerPool is only used by scalable agents (replicas > 1, fresh_per_call or worker)',
      fieldPath: '.workerPool',
    },
  ],
  'spec.bidding': [
    {
      rule: 'has(self.strategy) || has(self.script) || (has(self.llm) && self.llm)',
      message: 'bidding needs a strategy, a script or llm: true',
    },
  ],
  'spec.env.[]': envVarRules,
  'spec.volumes': [
    {
      rule: 'self.all(v, self.exists_one(w, w.name == v.name))',
      message: 'volume names must be unique',
    },
  ],
  'spec.volumes.[]': [
    {
      rule: 'has(self.configMap) != has(self.secret)',
      message: 'a volume needs exactly one of configMap or secret',
    },
  ],
};

export const workerPoolRules: RuleSet = {
  'spec.env.[]': envVarRules,
  // Static messages: messageExpression with string(int) blows the CEL cost budget of the schema.
  'spec.autoscaling': [
    {
      rule: 'self.minReplicas <= self.maxReplicas',
      message: 'autoscaling.minReplicas must not exceed autoscaling.maxReplicas',
      fieldPath: '.minReplicas',
    },
    {
      rule: '!has(self.fallbackReplicas) || self.fallbackReplicas <= self.maxReplicas',
      message: 'autoscaling.fallbackReplicas must not exceed autoscaling.maxReplicas',
      fieldPath: '.fallbackReplicas',
    },
  ],
  spec: [
    {
      // The cap per pool: whoever writes spec.replicas (kubectl scale, HPA, KEDA) stays under it.
      rule: '!has(self.replicas) || self.replicas <= self.autoscaling.maxReplicas',
      message: `replicas must not exceed autoscaling.maxReplicas; raise maxReplicas first (at most ${MAX_REPLICAS})`,
      fieldPath: '.replicas',
    },
  ],
};

export const toolServerRules: RuleSet = {
  'spec.env.[]': envVarRules,
  spec: [
    {
      rule: 'has(self.image) != has(self.url)',
      message: 'set image (a server in the cluster) or url (an external one), not both',
    },
    {
      rule: '!has(self.url) || (!has(self.command) && (!has(self.env) || size(self.env) == 0) && (!has(self.egress) || size(self.egress) == 0))',
      message: 'an external url runs nothing here: command, env and egress need image',
    },
  ],
};
