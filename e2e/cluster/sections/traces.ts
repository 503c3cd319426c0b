import { it } from 'vitest';
import { JAEGER_IMAGE } from '../../../test/cluster/addons.ts';
import {
  type JaegerTrace,
  jaegerConfig,
  normalizeTrace,
  parentSpanId,
  TracesResponse,
} from '../../../test/harness/jaeger.ts';
import { eventually } from '../../../test/harness/wait.ts';
import { CLUSTER_WAIT, c, getOnNode, holt, kubectl, progress, trailOf, waitHoltReady } from '../ctx.ts';
import { agentDoc, holtDoc, yamlDocs } from '../manifests.ts';
import { notApplicable } from '../not-applicable.ts';

const HOLT = 'traced';
const TRACES_NS = 'holt-e2e-traces';
const TRACE = '2d0b5c1e9f8a47b6b3c4d5e6f7a8b9c0';
const CALLER = 'a11ce0000000b0b0';
const OTLP_PORT = 4318;
const QUERY_PORT = 16686;

/** Jaeger (the image `make setup`'s binary makes) as a user would run a collector: its own namespace. */
function jaegerManifests(): string {
  const labels = { app: 'jaeger' };
  return yamlDocs([
    {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: 'jaeger', namespace: TRACES_NS },
      data: { 'config.yaml': jaegerConfig(OTLP_PORT, QUERY_PORT, 10_000, '0.0.0.0') },
    },
    {
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      metadata: { name: 'jaeger', namespace: TRACES_NS, labels },
      spec: {
        replicas: 1,
        selector: { matchLabels: labels },
        template: {
          metadata: { labels },
          spec: {
            securityContext: { runAsNonRoot: true, runAsUser: 65534 },
            containers: [
              {
                name: 'jaeger',
                image: JAEGER_IMAGE,
                imagePullPolicy: 'Never',
                args: ['--config', 'file:/etc/jaeger/config.yaml'],
                ports: [
                  { name: 'otlp-http', containerPort: OTLP_PORT },
                  { name: 'query', containerPort: QUERY_PORT },
                ],
                readinessProbe: { httpGet: { path: '/api/services', port: 'query' }, periodSeconds: 2 },
                volumeMounts: [{ name: 'config', mountPath: '/etc/jaeger' }],
              },
            ],
            volumes: [{ name: 'config', configMap: { name: 'jaeger' } }],
          },
        },
      },
    },
    {
      apiVersion: 'v1',
      kind: 'Service',
      metadata: { name: 'jaeger', namespace: TRACES_NS },
      spec: {
        selector: labels,
        ports: [
          { name: 'otlp-http', port: OTLP_PORT, targetPort: 'otlp-http' },
          { name: 'query', port: QUERY_PORT, targetPort: 'query' },
        ],
      },
    },
  ]);
}

/**
 * A Holt exporting to that collector, with one sealed agent (no egress, no DNS) whose tool writes its
 * TRACEPARENT into the Terminal.
 */
function tracedHolt(): string {
  const tool = `cat >/dev/null; printf '{"artefact_type":"Done","artefact_payload":"%s","summary":"done","structural_type":"Terminal"}\\n' "$TRACEPARENT"`;
  return yamlDocs([
    holtDoc(HOLT, {
      orchestrator: { bidTimeoutSeconds: 120 },
      tracing: { endpoint: `http://jaeger.${TRACES_NS}.svc:${OTLP_PORT}` },
    }),
    agentDoc('traced-finisher', HOLT, {
      role: 'Finisher',
      command: ['sh', '-c', tool],
      bidding: { strategy: 'exclusive' },
      // Sealed (no egress, bundled stores): no DNS; its pods find the collector's Service in /etc/hosts.
    }),
  ]);
}

/**
 * The real cluster: traces from pods. A Holt with `spec.tracing` exports its orchestrator's and pups'
 * spans to Jaeger in another namespace (through the Holt's NetworkPolicies, which open the collector's
 * port); the trace read back from Jaeger's query API holds the goal's workflow from the `holt --kube
 * forage --traceparent` that started it, and the tool in the agent container continued it.
 */
export function tracesTests(): void {
  it('traces from pods: a Holt with spec.tracing exports to Jaeger in another namespace; one trace from the caller through the orchestrator, the pup and the tool', async (ctx) => {
    if (!c.local)
      return notApplicable(
        ctx,
        "the Jaeger image is loaded only on the project's own cluster (make cluster-up)",
      );
    const { expect } = ctx;
    const t0 = Date.now();
    const inTraces = (args: string[], input?: string) => c.kubectl(['-n', TRACES_NS, ...args], { input });
    try {
      await c.kubectl(['create', 'namespace', TRACES_NS]);
      await inTraces(['apply', '-f', '-'], jaegerManifests());
      await inTraces(['rollout', 'status', 'deploy/jaeger', '--timeout=180s']);
      await kubectl(['apply', '-f', '-'], tracedHolt());
      await waitHoltReady(HOLT, 1);
      progress(`traces: Jaeger and Holt ${HOLT} Ready in ${Math.round((Date.now() - t0) / 1000)} s`);
      // The agent's pods are sealed: no resolver, the collector's Service in their /etc/hosts.
      const sealed = await kubectl([
        'get',
        'pods',
        '-l',
        `holt.io/instance=${HOLT},holt.io/role=Finisher`,
        '-o',
        'jsonpath={range .items[*]}{.metadata.labels.holt\\.io/dns} {.spec.hostAliases[*].hostnames[*]}{"\\n"}{end}',
      ]);
      expect(sealed.trim().split('\n').length).toBeGreaterThan(0);
      for (const line of sealed.trim().split('\n')) {
        expect(line.startsWith('deny '), line).toBe(true);
        expect(line.split(' '), line).toContain(`jaeger.${TRACES_NS}.svc`);
      }
      const out = await holt(HOLT, [
        'forage',
        '--goal',
        'trace me from a pod',
        '--traceparent',
        `00-${TRACE}-${CALLER}-01`,
        '--watch',
      ]);
      expect(out).toContain('Workflow completed');

      // Asked from inside a node's network namespace (where pod addresses route), as another pod would.
      const ip = (
        await inTraces(['get', 'pods', '-l', 'app=jaeger', '-o', 'jsonpath={.items[0].status.podIP}'])
      ).trim();
      const read = async (): Promise<JaegerTrace | undefined> => {
        const url = `http://${ip}:${QUERY_PORT}/api/traces/${TRACE}`;
        const stdout = await getOnNode(url);
        const body = TracesResponse.safeParse(JSON.parse(stdout));
        const raw = body.success ? body.data.data?.[0] : undefined;
        return raw ? normalizeTrace(raw) : undefined;
      };
      // Pods export in batches (every 5 s by default): waited for, not assumed.
      const trace = await eventually(
        'the workflow and the agent in the trace',
        async () => {
          const t = await read();
          const names = new Set(t?.spans.map((s) => s.operationName));
          return names.has('workflow') && names.has('invoke_agent Finisher') ? t : undefined;
        },
        {
          ...CLUSTER_WAIT,
          timeoutMs: 120_000,
          describe: async () => {
            const t = await read().catch((e: unknown) => String(e));
            return typeof t === 'string'
              ? t
              : `spans so far: ${t?.spans.map((s) => s.operationName).join(', ') || 'none'}`;
          },
        },
      );
      const one = (name: string) => {
        const found = trace.spans.filter((s) => s.operationName === name);
        expect(found, name).toHaveLength(1);
        return found[0]!;
      };
      const workflow = one('workflow');
      const invoke = one('invoke_agent Finisher');
      expect(parentSpanId(workflow)).toBe(CALLER);
      expect(workflow.process.serviceName).toBe('holt-orchestrator');
      expect(invoke.process.serviceName).toBe('holt-pup');
      expect(trace.spans.some((s) => s.operationName === 'bid Finisher')).toBe(true);
      expect(trace.spans.some((s) => s.operationName === 'orchestrator step')).toBe(true);
      // The tool, in the agent container, got the invocation's span as TRACEPARENT.
      const done = (await trailOf(HOLT)).find((a) => a.structural_type === 'Terminal');
      expect(done?.payload).toBe(`00-${TRACE}-${invoke.spanID}-01`);
      // No orphan: every span's parent is in the trace, or is the caller's.
      const ids = new Set(trace.spans.map((s) => s.spanID));
      const orphans = trace.spans.filter((s) => {
        const p = parentSpanId(s);
        return p === undefined || (p !== CALLER && !ids.has(p));
      });
      expect(orphans.map((s) => s.operationName)).toEqual([]);
      progress(
        `traces: ${trace.spans.length} spans from pods in one trace, in ${Math.round((Date.now() - t0) / 1000)} s`,
      );
    } finally {
      await kubectl(['delete', 'agents', '-l', `e2e.holt.io/holt=${HOLT}`, '--timeout=120s']).catch(() => '');
      await kubectl(['delete', 'holt', HOLT, '--ignore-not-found', '--timeout=120s']).catch(() => '');
      await c
        .kubectl(['delete', 'namespace', TRACES_NS, '--ignore-not-found', '--wait=false'])
        .catch(() => '');
    }
  });
}
