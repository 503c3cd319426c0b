import type { HoltSpec } from '../../api/holt.ts';
import { applyIfChanged } from '../kube/apply.ts';
import { isNotFound, type KubeObject } from '../kube/kube.ts';
import { type ConditionInput, condition } from '../kube/status.ts';
import type { Owner } from '../specs/meta.ts';
import { podMonitor, podMonitorName } from '../specs/monitoring.ts';
import type { ControllerContext } from './context.ts';

/**
 * What the operator last applied of each Holt's PodMonitor (by the Holt's uid). PodMonitors have no
 * informer: their CRD may not exist, and a watch on a missing kind would keep the caches from ever
 * syncing. So the last applied object stands in for the cache (nothing is written while it still
 * matches), and a Holt that turns monitoring off is checked once with a GET.
 */
const applied = new Map<string, KubeObject | 'absent'>();

const OFF = condition('MonitoringReady', true, 'Disabled', 'spec.monitoring.podMonitor is off');

/**
 * Converges a Holt's PodMonitor with spec.monitoring, and says how in the MonitoringReady condition
 * (a missing Prometheus Operator is said there: it never makes the Holt Degraded or not Ready).
 */
export async function syncPodMonitor(
  ctx: ControllerContext,
  owner: Owner,
  spec: HoltSpec,
): Promise<ConditionInput> {
  const last = applied.get(owner.uid);
  if (!spec.monitoring.podMonitor) {
    if (last === 'absent') return OFF;
    const name = podMonitorName(owner.name);
    // A missing kind (404) or object: nothing to delete.
    const live = await ctx.client.get('PodMonitor', owner.namespace, name).catch((e: unknown) => {
      if (isNotFound(e)) return undefined;
      throw e;
    });
    if (live) await ctx.client.delete('PodMonitor', owner.namespace, name, live.metadata.uid);
    applied.set(owner.uid, 'absent');
    return OFF;
  }
  try {
    const r = await applyIfChanged(ctx.client, podMonitor(owner, spec), last === 'absent' ? undefined : last);
    applied.set(owner.uid, r.object);
    return condition('MonitoringReady', true, 'PodMonitorApplied', 'PodMonitor applied');
  } catch (e) {
    applied.delete(owner.uid);
    if (!isNotFound(e)) throw e;
    return condition(
      'MonitoringReady',
      false,
      'PrometheusOperatorMissing',
      'spec.monitoring.podMonitor is set but the cluster has no PodMonitor kind (monitoring.coreos.com CRDs): install the Prometheus Operator',
    );
  }
}
