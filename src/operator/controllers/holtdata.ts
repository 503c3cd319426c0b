import type { HoltStatus } from '../../api/status.ts';
import { withTimeout } from '../../common/timeout.ts';
import { nowIso } from '../kube/status.ts';
import type { HoltData } from './agentfigures.ts';
import type { ControllerContext } from './context.ts';

export type HoltDataStatus = NonNullable<HoltStatus['data']>;

/** How long a reconcile waits for the Holt's Redis before keeping the last values. */
export const RUNTIME_READ_TIMEOUT_MS = 3_000;

/** `status.data` of a Holt from what its Redis holds (pure). */
export function holtDataStatus(d: HoltData): HoltDataStatus {
  const r = d.retention;
  return {
    quarantined: d.quarantined,
    ...(r
      ? {
          retention: {
            days: r.days,
            ...(r.last_pass_ms ? { lastPassTime: nowIso(r.last_pass_ms) } : {}),
            removedWorkflows: r.total.workflows,
            removedArtefacts: r.total.artefacts,
            removedTurns: r.total.turns,
            ...(r.error ? { lastError: r.error.slice(0, 500) } : {}),
          },
        }
      : {}),
  };
}

/**
 * The Holt's `status.data`, read from its Redis; when that cannot be read, the values last written
 * (status is applied whole: leaving them out would erase them). Undefined without a runtime reader.
 */
export async function readHoltData(
  ctx: ControllerContext,
  ns: string,
  name: string,
  prev: HoltDataStatus | undefined,
): Promise<HoltDataStatus | undefined> {
  const read = ctx.runtime?.readHolt?.bind(ctx.runtime);
  if (!read) return undefined;
  try {
    return holtDataStatus(
      await withTimeout(read({ namespace: ns, name }), RUNTIME_READ_TIMEOUT_MS, 'reading the Holt Redis'),
    );
  } catch (e) {
    ctx.log.debug(
      { event_type: 'holt_data_unavailable', holt: `${ns}/${name}`, error: String(e) },
      'cannot read the quarantine / retention report; keeping the last values',
    );
    return prev;
  }
}
