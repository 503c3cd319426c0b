import type { V1Container, V1PodSecurityContext, V1Probe, V1SecurityContext } from '@kubernetes/client-node';

/** The pup's and orchestrator's health/metrics port (HOLT_HEALTH_PORT). */
export const HEALTH_PORT = 8080;
/** The orchestrator's ingress port for living agents (HOLT_INGRESS_PORT), when an Agent asks for ingress. */
export const INGRESS_PORT = 8090;

/** The common Prometheus scrape hints, on pod templates (what annotation-based scrape configs read). */
export function scrapeAnnotations(port = HEALTH_PORT): Record<string, string> {
  return {
    'prometheus.io/scrape': 'true',
    'prometheus.io/port': String(port),
    'prometheus.io/path': '/metrics',
  };
}
/** Default non-root user of the runtime image (distroless "nonroot"). */
export const RUNTIME_UID = 65532;

/** Pod-level half of the restricted Pod Security profile. */
export function podSecurity(uid: number, fsGroup = uid): V1PodSecurityContext {
  return {
    runAsNonRoot: true,
    runAsUser: uid,
    runAsGroup: uid,
    fsGroup,
    seccompProfile: { type: 'RuntimeDefault' },
  };
}

/** Container-level half: no privilege escalation, read-only root, every capability dropped. */
export function containerSecurity(): V1SecurityContext {
  return {
    allowPrivilegeEscalation: false,
    readOnlyRootFilesystem: true,
    runAsNonRoot: true,
    capabilities: { drop: ['ALL'] },
    seccompProfile: { type: 'RuntimeDefault' },
  };
}

/**
 * An init container that copies the runtime image's bundle (/opt/holt: Node, the runner, holt) into
 * the emptyDir `volume`, for a container of another image. `cp -R`, never `-a`: the emptyDir's root
 * belongs to root (group fsGroup), and setting its times as this non-root user fails the copy.
 */
export function bundleCopyContainer(name: string, runtimeImage: string, volume: string): V1Container {
  return {
    name,
    image: runtimeImage,
    command: ['cp', '-R', '/opt/holt/.', '/holt/'],
    resources: { requests: { cpu: '10m', memory: '32Mi' } },
    securityContext: containerSecurity(),
    volumeMounts: [{ name: volume, mountPath: '/holt' }],
  };
}

export function httpProbe(path: string, port: number | string, period = 10, failures = 3): V1Probe {
  return { httpGet: { path, port }, periodSeconds: period, timeoutSeconds: 3, failureThreshold: failures };
}

export function execProbe(command: string[], period = 10, failures = 3): V1Probe {
  return { exec: { command }, periodSeconds: period, timeoutSeconds: 5, failureThreshold: failures };
}

/** Liveness on /healthz, readiness on /readyz (the pup and orchestrator probe server). */
export function holtProbes(): Pick<V1Container, 'livenessProbe' | 'readinessProbe' | 'startupProbe'> {
  return {
    startupProbe: httpProbe('/healthz', 'http', 2, 30),
    livenessProbe: httpProbe('/healthz', 'http', 10, 3),
    readinessProbe: httpProbe('/readyz', 'http', 5, 3),
  };
}

/** Resource requirements without undefined members (SSA compares what is sent). */
export function resourcesOf(
  r: { requests?: Record<string, string>; limits?: Record<string, string> } | undefined,
  fallback: { requests?: Record<string, string>; limits?: Record<string, string> },
): V1Container['resources'] {
  const v = r ?? fallback;
  return { ...(v.requests ? { requests: v.requests } : {}), ...(v.limits ? { limits: v.limits } : {}) };
}
