import { isSpanContextValid, trace } from '@opentelemetry/api';
import { type Logger, pino } from 'pino';

export type { Logger } from 'pino';

/** Field names that carry secrets: censored at the top level of a log line and one level down. */
export const SECRET_KEYS: ReadonlySet<string> = new Set([
  'password',
  'apiKey',
  'api_key',
  'token',
  'authorization',
  'Authorization',
]);
/** Environment variables that carry secrets, censored under an `env` field. */
const SECRET_ENV: ReadonlySet<string> = new Set(['OPENAI_API_KEY', 'HOLT_LLM_API_KEY']);
const CENSOR = '[redacted]';

const isSecret = (key: string) => SECRET_KEYS.has(key);
const isSecretEnv = (key: string) => SECRET_ENV.has(key) || SECRET_KEYS.has(key);

/**
 * `obj` with the secret keys censored: a shallow copy that keeps the prototype and every own
 * property (an Error keeps its message and stack), the secret ones replaced by writable values (so
 * frozen objects and getters are fine). Unchanged (the same object) when it holds no secret.
 */
function scrubLevel(obj: object, secret: (key: string) => boolean): object {
  const secrets = Object.keys(obj).filter(secret);
  if (!secrets.length) return obj;
  try {
    const props = Object.getOwnPropertyDescriptors(obj);
    for (const key of secrets)
      props[key] = { value: CENSOR, writable: true, enumerable: true, configurable: true };
    return Object.create(Object.getPrototypeOf(obj), props) as object;
  } catch {
    return { redacted: CENSOR }; // an exotic object (a proxy, say): log nothing of it
  }
}

/**
 * A log line's fields with secrets censored, copying only what changes (the caller's objects are
 * never touched). In place of pino's `redact` option: its library parses every path again on every
 * line, which was a seventh of the orchestrator's allocations.
 */
export function scrubSecrets(fields: Record<string, unknown>): Record<string, unknown> {
  let out: Record<string, unknown> | null = null;
  for (const key of Object.keys(fields)) {
    const v = fields[key];
    let next = v;
    if (SECRET_KEYS.has(key)) next = CENSOR;
    else if (typeof v === 'object' && v !== null && !Array.isArray(v))
      next = scrubLevel(v, key === 'env' ? isSecretEnv : isSecret);
    if (next !== v) {
      out ??= { ...fields };
      out[key] = next;
    }
  }
  return out ?? fields;
}

/** Credentials inside URLs (redis://:pw@host, postgres://u:pw@host) are masked in any string we log. */
export function redactUrl(url: string): string {
  try {
    const u = new URL(url);
    if (!u.password) return url;
    u.password = '***';
    return u.toString();
  } catch {
    // Not a URL: mask anything between "user:" and the last "@" of the authority.
    return url.replace(/(\/\/[^/@:]*:).*@/, '$1***@');
  }
}

/**
 * JSON lines on stdout with Holt's shape: timestamp (RFC3339 UTC), level, component, event_type.
 * HOLT_LOG_LEVEL picks the level (info by default).
 */
export function createLogger(
  component: string,
  bindings: Record<string, unknown> = {},
  dest: pino.DestinationStream = pino.destination({ dest: 1, sync: true }),
): Logger {
  return pino(
    {
      level: process.env.HOLT_LOG_LEVEL ?? 'info',
      base: { component, ...bindings },
      messageKey: 'message',
      timestamp: () => `,"timestamp":"${new Date().toISOString()}"`,
      formatters: { level: (label) => ({ level: label }), log: scrubSecrets, bindings: scrubSecrets },
      // A line written inside a span names it: from a log line to its trace, and back.
      mixin: traceIds,
    },
    // Synchronous by default, like Node's own stdout on Linux: measured cheaper per line than pino's
    // asynchronous stream (no thread-pool hop per write), and no line is lost when the process dies.
    dest,
  );
}

/** The active span's ids (OpenTelemetry's log field names), or nothing outside a valid span. */
function traceIds(): Record<string, string> {
  const sc = trace.getActiveSpan()?.spanContext();
  return sc && isSpanContextValid(sc) ? { trace_id: sc.traceId, span_id: sc.spanId } : {};
}

export function silentLogger(): Logger {
  return pino({ level: 'silent' });
}
