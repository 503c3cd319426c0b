/**
 * Secrets (the API key, database password) must never reach a log line, an artefact, an event or a
 * step row (docs/security.md). The key never goes to the model or to tools, so it can only leak through a
 * bug; this scrubber is the belt to those braces, applied to everything the loop writes.
 */
export class Scrubber {
  private readonly secrets: string[];
  constructor(secrets: (string | undefined)[]) {
    // Short values would mangle ordinary text and are not credentials worth the name.
    this.secrets = secrets.filter((s): s is string => typeof s === 'string' && s.length >= 8);
  }

  text(s: string): string {
    let out = s;
    for (const secret of this.secrets) out = out.split(secret).join('[redacted]');
    return out;
  }

  /** Deep copy of a JSON value with every string scrubbed. */
  json<T>(v: T): T {
    if (!this.secrets.length) return v;
    return JSON.parse(this.text(JSON.stringify(v))) as T;
  }
}

/** What every process needs to behave (locale, home, path); never a credential. */
const SYSTEM_ENV = ['PATH', 'HOME', 'USER', 'LOGNAME', 'SHELL', 'LANG', 'LANGUAGE', 'TZ', 'TMPDIR', 'TERM'];
/** Holt's tool contract (docs/agent-worker.md § The tool's input and output): who the tool works for, where, with which prompts. */
export const CONTRACT_ENV = [
  'HOLT_INSTANCE_NAME',
  'HOLT_AGENT_NAME',
  'HOLT_WORKSPACE',
  'HOLT_MODE',
  'HOLT_PROMPT_CLAIM',
  'HOLT_PROMPT_EXECUTION',
];
/** JSON array of the variable names the agent's spec declares for its tools (set by pupEnvironment). */
export const TOOL_ENV_NAMES = 'HOLT_TOOL_ENV';
/** The idempotency key of one tool run: the same across re-runs of the same call. */
export const CALL_ID_ENV = 'HOLT_CALL_ID';

function declaredNames(base: NodeJS.ProcessEnv): string[] {
  try {
    const v: unknown = JSON.parse(base[TOOL_ENV_NAMES] ?? '[]');
    return Array.isArray(v) ? v.filter((x): x is string => typeof x === 'string') : [];
  } catch {
    return [];
  }
}

/**
 * A tool's, bid script's or health check's environment: an allowlist, never the pup's own. System
 * variables, the contract, what the agent declares, then `extra` (a tool's own env, the call id).
 * Store URLs, the LLM key and anything else the pup was given stay out by construction.
 */
export function toolEnvironment(
  base: NodeJS.ProcessEnv,
  extra?: Record<string, string>,
  callId?: string,
): Record<string, string> {
  const env: Record<string, string> = {};
  const allowed = new Set([...SYSTEM_ENV, ...CONTRACT_ENV, ...declaredNames(base)]);
  for (const [k, v] of Object.entries(base))
    if (v !== undefined && (allowed.has(k) || k.startsWith('LC_'))) env[k] = v;
  return { ...env, ...extra, ...(callId ? { [CALL_ID_ENV]: callId } : {}) };
}

/**
 * What a locally started component takes from the environment of `holt up`: system and locale
 * variables, proxies and CA bundles, Node's own, OpenTelemetry's and Holt's settings, never a credential (those go on a
 * descriptor). A tool can read its pup's /proc/<pid>/environ, so nothing else is passed down.
 */
export function componentEnvironment(
  env: NodeJS.ProcessEnv,
  drop: (string | undefined)[] = [],
): Record<string, string> {
  const secret = new Set([...STORE_URL_VARS, ...LLM_KEY_VARS, ...drop]);
  const keep = (k: string) =>
    SYSTEM_ENV.includes(k) ||
    /^(LC_|NODE_|HOLT_|OTEL_)/.test(k) ||
    /^(HTTPS?_PROXY|NO_PROXY|https?_proxy|no_proxy|SSL_CERT_FILE|SSL_CERT_DIR)$/.test(k);
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(env)) if (v !== undefined && keep(k) && !secret.has(k)) out[k] = v;
  return out;
}

/** Variables that hold an LLM key by convention. */
export const LLM_KEY_VARS = ['HOLT_LLM_API_KEY', 'OPENAI_API_KEY'];

/** Variables holding store URLs (with their passwords), here and in the user's shell for `holt up`. */
export const STORE_URL_VARS = [
  'DATABASE_URL',
  'REDIS_URL',
  'NATS_URL',
  'HOLT_REDIS_URL',
  'HOLT_NATS_URL',
  'HOLT_DATABASE_URL',
];

/** The credentials a process was given: the LLM key and the passwords inside the store URLs. */
export function secretsFromEnv(env: NodeJS.ProcessEnv, apiKeyEnv?: string): string[] {
  const out: string[] = [];
  // PGPASSWORD: an external Postgres's component role (src/operator/specs/stores.ts), beside its URL.
  for (const k of [...LLM_KEY_VARS, apiKeyEnv, 'PGPASSWORD']) {
    const v = k ? env[k] : undefined;
    if (v) out.push(v);
  }
  for (const k of STORE_URL_VARS) {
    const v = env[k];
    if (!v) continue;
    try {
      const u = new URL(v);
      if (u.password) out.push(decodeURIComponent(u.password));
    } catch {
      // not a URL: nothing to extract
    }
  }
  return out;
}
