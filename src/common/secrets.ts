/**
 * Secrets (the API key, database password) must never reach a log line, an artefact, an event or a
 * step row (DESIGN §6.6). The key never goes to the model or to tools, so it can only leak through a
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

/** Variables a tool process never sees: credentials of the pup itself. */
export function toolEnvironment(
  base: NodeJS.ProcessEnv,
  extra: Record<string, string> | undefined,
  apiKeyEnv: string | undefined,
): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...base };
  for (const k of ['HOLT_LLM_API_KEY', 'OPENAI_API_KEY', 'DATABASE_URL', apiKeyEnv]) if (k) delete env[k];
  return { ...env, ...extra };
}

/** The credentials a process was given: the LLM key and the passwords inside the store URLs. */
export function secretsFromEnv(env: NodeJS.ProcessEnv, apiKeyEnv?: string): string[] {
  const out: string[] = [];
  for (const k of ['HOLT_LLM_API_KEY', 'OPENAI_API_KEY', apiKeyEnv]) {
    const v = k ? env[k] : undefined;
    if (v) out.push(v);
  }
  for (const k of ['DATABASE_URL', 'REDIS_URL', 'NATS_URL']) {
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
