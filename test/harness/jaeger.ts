import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { z } from 'zod';
import { cacheDir, MissingBinaryError } from './bins.ts';
import { freePort, retryOnPortClash } from './ports.ts';
import { type ServerProcess, spawnServer, waitReady } from './proc.ts';
import { makeTempDir, removeDir } from './tmp.ts';

/**
 * A real trace backend for the tests: Jaeger v2 (an OpenTelemetry Collector distribution, built by
 * scripts/setup/jaeger.sh) with in-memory storage, an OTLP/HTTP receiver and the query HTTP API, all on
 * free loopback ports, so that several test files can run one each.
 */

// The query API's JSON (internal/uimodel in Jaeger's module), parsed so a format change fails loudly.
const KeyValue = z.object({ key: z.string(), type: z.string().optional(), value: z.unknown() });
export type JaegerTag = z.infer<typeof KeyValue>;
const Reference = z.object({
  refType: z.enum(['CHILD_OF', 'FOLLOWS_FROM']),
  traceID: z.string(),
  spanID: z.string(),
});
const Process = z.object({ serviceName: z.string(), tags: z.array(KeyValue).nullish() });
const RawSpan = z.object({
  traceID: z.string(),
  spanID: z.string(),
  operationName: z.string(),
  references: z.array(Reference).nullish(),
  /** Microseconds since the epoch. */
  startTime: z.number(),
  duration: z.number(),
  tags: z.array(KeyValue).nullish(),
  logs: z.array(z.object({ timestamp: z.number(), fields: z.array(KeyValue).nullish() })).nullish(),
  processID: z.string().optional(),
  process: Process.optional(),
  warnings: z.array(z.string()).nullish(),
});
const RawTrace = z.object({
  traceID: z.string(),
  spans: z.array(RawSpan),
  processes: z.record(z.string(), Process).nullish(),
  warnings: z.array(z.string()).nullish(),
});
const Envelope = <T extends z.ZodType>(data: T) =>
  z.object({
    data: data.nullable(),
    errors: z.array(z.object({ code: z.number().optional(), msg: z.string() })).nullish(),
  });
export const TracesResponse = Envelope(z.array(RawTrace));
export const ServicesResponse = Envelope(z.array(z.string()));

export interface JaegerSpan {
  traceID: string;
  spanID: string;
  operationName: string;
  references: { refType: 'CHILD_OF' | 'FOLLOWS_FROM'; traceID: string; spanID: string }[];
  startTime: number;
  duration: number;
  tags: JaegerTag[];
  logs: { timestamp: number; fields: JaegerTag[] }[];
  /** Resolved from the trace's `processes` map. */
  process: { serviceName: string; tags: JaegerTag[] };
}
export interface JaegerTrace {
  traceID: string;
  spans: JaegerSpan[];
  warnings: string[];
}

/** One trace of the query API with each span's process looked up and the nullable lists made empty. */
export function normalizeTrace(raw: z.infer<typeof RawTrace>): JaegerTrace {
  const processes = raw.processes ?? {};
  const spans = raw.spans.map((s): JaegerSpan => {
    const p = s.process ?? (s.processID ? processes[s.processID] : undefined);
    if (!p) throw new Error(`jaeger: span ${s.spanID} of trace ${raw.traceID} has no process`);
    return {
      traceID: s.traceID,
      spanID: s.spanID,
      operationName: s.operationName,
      references: s.references ?? [],
      startTime: s.startTime,
      duration: s.duration,
      tags: s.tags ?? [],
      logs: (s.logs ?? []).map((l) => ({ timestamp: l.timestamp, fields: l.fields ?? [] })),
      process: { serviceName: p.serviceName, tags: p.tags ?? [] },
    };
  });
  return { traceID: raw.traceID, spans, warnings: raw.warnings ?? [] };
}

/** The span's parent (its CHILD_OF reference), undefined for a root. */
export function parentSpanId(span: JaegerSpan): string | undefined {
  return span.references.find((r) => r.refType === 'CHILD_OF')?.spanID;
}

/** A tag's value (an OTel attribute, or one Jaeger derives such as `span.kind`, `otel.status_code`). */
export function tagValue(span: JaegerSpan, key: string): unknown {
  return span.tags.find((t) => t.key === key)?.value;
}

export interface TraceQuery {
  operation?: string;
  /** Tag filters (`tags={"k":"v"}` in the API). */
  tags?: Record<string, string>;
  limit?: number;
}

export interface Jaeger {
  /** The OTLP/HTTP base URL; exporters post to `${otlpHttpUrl}/v1/traces` (OTEL_EXPORTER_OTLP_ENDPOINT). */
  otlpHttpUrl: string;
  /** The query service's base URL (its API under /api). */
  queryUrl: string;
  proc: ServerProcess;
  services(): Promise<string[]>;
  /** The traces with a span of `service` in the default lookback (newest first, as Jaeger returns them). */
  traces(service: string, query?: TraceQuery): Promise<JaegerTrace[]>;
  /** One trace by id, undefined when Jaeger has none (404). */
  trace(id: string): Promise<JaegerTrace | undefined>;
  stop(): Promise<void>;
}

/** The version scripts/setup/jaeger.sh builds. */
export const JAEGER_VERSION = '1.76.0';

/** The binary scripts/setup/jaeger.sh built (its current.env), or $JAEGER_BIN. */
export function jaegerBinary(): string {
  const explicit = process.env.JAEGER_BIN;
  if (explicit) {
    if (!existsSync(explicit)) throw new MissingBinaryError('jaeger', [explicit]);
    return explicit;
  }
  const envFile = join(cacheDir(), 'jaeger', 'current.env');
  if (existsSync(envFile)) {
    const m = /^JAEGER=(.+)$/m.exec(readFileSync(envFile, 'utf8'));
    if (m?.[1] && existsSync(m[1].trim())) return m[1].trim();
  }
  throw new MissingBinaryError('jaeger', [envFile]);
}

/**
 * The collector config: only what the tests read, every listener on loopback. The query's gRPC API
 * (unused) and the collector's own metrics would otherwise take fixed ports (16685, 8888): gRPC binds
 * port 0 and the self-metrics are off. The query's own tracing (on by default in v2) would export to
 * localhost:4317, someone else's port, and holds SIGTERM for seconds while it retries: off.
 */
export function jaegerConfig(
  otlpPort: number,
  queryPort: number,
  maxTraces = 100_000,
  host = '127.0.0.1',
): string {
  return `service:
  extensions: [jaeger_storage, jaeger_query]
  pipelines:
    traces:
      receivers: [otlp]
      exporters: [jaeger_storage_exporter]
  telemetry:
    metrics:
      level: none
    logs:
      level: info
extensions:
  jaeger_storage:
    backends:
      memstore:
        memory:
          max_traces: ${maxTraces}
  jaeger_query:
    storage:
      traces: memstore
    enable_tracing: false
    http:
      endpoint: ${host}:${queryPort}
    grpc:
      endpoint: 127.0.0.1:0
receivers:
  otlp:
    protocols:
      http:
        endpoint: ${host}:${otlpPort}
exporters:
  jaeger_storage_exporter:
    trace_storage: memstore
`;
}

/** Jaeger on free loopback ports (new picks when another process took one first). */
export function startJaeger(): Promise<Jaeger> {
  return retryOnPortClash(startJaegerOnce);
}

async function getJson(url: string): Promise<{ status: number; body: unknown }> {
  const res = await fetch(url, { signal: AbortSignal.timeout(10_000) });
  const text = await res.text();
  try {
    return { status: res.status, body: JSON.parse(text) };
  } catch {
    throw new Error(`jaeger: ${url} answered ${res.status} with non-JSON: ${text.slice(0, 200)}`);
  }
}

/** The envelope's data (null when Jaeger has none: /api/services before any span), or its errors thrown. */
function dataOf<T>(
  url: string,
  r: { status: number; body: unknown },
  schema: z.ZodType<{ data: T | null }>,
): T | null {
  const parsed = schema.safeParse(r.body);
  if (!parsed.success)
    throw new Error(`jaeger: ${url} answered ${r.status}, unexpected JSON: ${parsed.error.message}`);
  const errors = (parsed.data as { errors?: { msg: string }[] | null }).errors ?? [];
  if (r.status !== 200 || errors.length > 0) {
    throw new Error(
      `jaeger: ${url} answered ${r.status}: ${errors.map((e) => e.msg).join('; ') || 'no error text'}`,
    );
  }
  return parsed.data.data;
}

async function startJaegerOnce(): Promise<Jaeger> {
  const bin = jaegerBinary();
  const dir = makeTempDir('jaeger');
  try {
    const otlpPort = await freePort();
    const queryPort = await freePort();
    const config = join(dir, 'jaeger.yaml');
    writeFileSync(config, jaegerConfig(otlpPort, queryPort));
    const proc = spawnServer({ name: 'jaeger', command: bin, args: ['--config', `file:${config}`], dir });
    const queryUrl = `http://127.0.0.1:${queryPort}`;
    const otlpHttpUrl = `http://127.0.0.1:${otlpPort}`;
    // Ready when the query API answers and the OTLP receiver accepts a (empty) request: both are up.
    await waitReady(proc, async () => {
      const services = await fetch(`${queryUrl}/api/services`, { signal: AbortSignal.timeout(3_000) });
      if (!services.ok) return false;
      const otlp = await fetch(`${otlpHttpUrl}/v1/traces`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: '{}',
        signal: AbortSignal.timeout(3_000),
      });
      return otlp.ok;
    });
    const jaeger: Jaeger = {
      otlpHttpUrl,
      queryUrl,
      proc,
      async services() {
        const url = `${queryUrl}/api/services`;
        return dataOf(url, await getJson(url), ServicesResponse) ?? [];
      },
      async traces(service, query = {}) {
        const params = new URLSearchParams({ service, limit: String(query.limit ?? 100) });
        if (query.operation) params.set('operation', query.operation);
        if (query.tags) params.set('tags', JSON.stringify(query.tags));
        const url = `${queryUrl}/api/traces?${params}`;
        // A service Jaeger has not seen gives an empty list (200), not an error.
        return (dataOf(url, await getJson(url), TracesResponse) ?? []).map(normalizeTrace);
      },
      async trace(id) {
        const url = `${queryUrl}/api/traces/${encodeURIComponent(id)}`;
        const r = await getJson(url);
        if (r.status === 404) return undefined;
        const [t] = dataOf(url, r, TracesResponse) ?? [];
        return t ? normalizeTrace(t) : undefined;
      },
      async stop() {
        await proc.stop();
        removeDir(dir);
      },
    };
    return jaeger;
  } catch (e) {
    removeDir(dir);
    throw e;
  }
}
