import { z } from 'zod';
import { parseEnv } from '../common/config.ts';
import type { EnvSetting } from '../common/program.ts';

/**
 * Tracing settings from the standard OpenTelemetry variables (the subset Holt honours; the OTLP
 * exporter reads its own OTEL_EXPORTER_OTLP_* headers, timeout and compression too). Export is on only
 * when an OTLP endpoint is set and the SDK is not disabled: with neither, no span leaves the process.
 */
export interface TracingSettings {
  /** The OTLP/HTTP traces URL (…/v1/traces), or null: nothing is exported. */
  tracesUrl: string | null;
  /**
   * Which traces are kept: `ratio` of them (1 = all, 0 = none); `parentBased`: a span with a parent
   * follows the parent's decision, and the ratio applies to new traces only (the default).
   */
  sampler: { parentBased: boolean; ratio: number };
  /** The service name, or the program's own (`holt-<program>`). */
  serviceName: string | undefined;
  /** Model and tool content on spans: off unless asked, and then capped at this many characters. */
  contentChars: number;
}

const blank = (v: unknown) => (v === '' ? undefined : v);
const url = z.preprocess(blank, z.url({ error: 'must be a URL' }).optional());
const SAMPLERS = [
  'always_on',
  'always_off',
  'traceidratio',
  'parentbased_always_on',
  'parentbased_always_off',
  'parentbased_traceidratio',
] as const;

export const TracingEnv = z.object({
  OTEL_SDK_DISABLED: z.preprocess(blank, z.enum(['true', 'false']).optional()),
  OTEL_TRACES_EXPORTER: z.preprocess(blank, z.enum(['otlp', 'none']).optional()),
  OTEL_EXPORTER_OTLP_ENDPOINT: url,
  OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: url,
  OTEL_EXPORTER_OTLP_PROTOCOL: z.preprocess(
    blank,
    z.enum(['http/protobuf'], { error: 'only http/protobuf is supported' }).optional(),
  ),
  OTEL_TRACES_SAMPLER: z.preprocess(
    blank,
    z.enum(SAMPLERS, { error: `must be one of ${SAMPLERS.join(', ')}` }).optional(),
  ),
  OTEL_TRACES_SAMPLER_ARG: z.preprocess(blank, z.coerce.number().min(0).max(1).optional()),
  OTEL_SERVICE_NAME: z.preprocess(blank, z.string().max(128).optional()),
  HOLT_TRACE_CONTENT_CHARS: z.preprocess(blank, z.coerce.number().int().min(0).max(65_536).default(0)),
});

/** The settings (pure); a bad value is a ConfigError naming the variable. */
export function tracingSettings(env: NodeJS.ProcessEnv): TracingSettings {
  const e = parseEnv(TracingEnv, env);
  const off = e.OTEL_SDK_DISABLED === 'true' || e.OTEL_TRACES_EXPORTER === 'none';
  // The per-signal endpoint is the full URL; the generic one gets the signal's path (OTLP spec).
  const tracesUrl = off
    ? null
    : (e.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT ??
      (e.OTEL_EXPORTER_OTLP_ENDPOINT
        ? `${e.OTEL_EXPORTER_OTLP_ENDPOINT.replace(/\/+$/, '')}/v1/traces`
        : null));
  const name = e.OTEL_TRACES_SAMPLER ?? 'parentbased_always_on';
  const root = name.replace(/^parentbased_/, '');
  const ratio = root === 'always_off' ? 0 : root === 'traceidratio' ? (e.OTEL_TRACES_SAMPLER_ARG ?? 1) : 1;
  return {
    tracesUrl,
    sampler: { parentBased: name.startsWith('parentbased_'), ratio },
    serviceName: e.OTEL_SERVICE_NAME,
    contentChars: e.HOLT_TRACE_CONTENT_CHARS,
  };
}

/** The tracing settings as a program's --help lists them (OTLP headers may hold a token: environment only). */
export const TRACING_SETTINGS: EnvSetting[] = [
  {
    env: 'OTEL_EXPORTER_OTLP_ENDPOINT',
    help: 'OTLP/HTTP base URL of a trace collector; unset: no trace is exported',
  },
  {
    env: 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT',
    help: 'the full OTLP/HTTP traces URL (wins over the base URL)',
  },
  { env: 'OTEL_EXPORTER_OTLP_PROTOCOL', help: 'http/protobuf (the only one) [http/protobuf]' },
  {
    env: 'OTEL_TRACES_SAMPLER',
    help: 'always_on, always_off, traceidratio or parentbased_* [parentbased_always_on]',
  },
  { env: 'OTEL_TRACES_SAMPLER_ARG', help: 'the ratio of traceidratio samplers, 0 to 1 [1]' },
  { env: 'OTEL_TRACES_EXPORTER', help: 'otlp or none [otlp]' },
  { env: 'OTEL_SDK_DISABLED', help: 'true: no trace is exported [false]' },
  { env: 'OTEL_SERVICE_NAME', help: 'the service name of its spans [holt-<program>]' },
  {
    env: 'HOLT_TRACE_CONTENT_CHARS',
    help: 'model messages on spans, capped at this many characters; 0 = never [0]',
  },
];
