import type { V1EnvVar } from '@kubernetes/client-node';
import type { HoltSpec } from '../../api/holt.ts';

/**
 * The OTEL_* variables of a Holt's orchestrator and pup containers (never the agent container: the
 * headers may hold a collector token). None without an endpoint: nothing is exported.
 */
export function tracingEnv(t: HoltSpec['tracing']): V1EnvVar[] {
  if (!t.endpoint) return [];
  return [
    { name: 'OTEL_EXPORTER_OTLP_ENDPOINT', value: t.endpoint },
    { name: 'OTEL_TRACES_SAMPLER', value: 'parentbased_traceidratio' },
    { name: 'OTEL_TRACES_SAMPLER_ARG', value: String(t.samplerRatio) },
    ...(t.contentChars ? [{ name: 'HOLT_TRACE_CONTENT_CHARS', value: String(t.contentChars) }] : []),
    ...(t.headersSecretRef
      ? [
          {
            name: 'OTEL_EXPORTER_OTLP_HEADERS',
            valueFrom: { secretKeyRef: { name: t.headersSecretRef.name, key: t.headersSecretRef.key } },
          },
        ]
      : []),
  ];
}
