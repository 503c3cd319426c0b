/** The autoscaling settings of a WorkerPool (src/api/workerpool.ts Autoscaling, defaults applied). */
export interface ScalePolicy {
  minReplicas: number;
  maxReplicas: number;
  activationBacklog: number;
  targetBacklogPerReplica: number;
  cooldownSeconds: number;
  stabilizationSeconds: number;
  fallbackReplicas?: number;
  fallbackAfterFailures: number;
}

/** What the autoscaler remembers between ticks (lastActiveTime is also kept in status). */
export interface ScaleState {
  lastActiveTime?: number;
  failures: number;
  /** Recent recommendations (ms, replicas), for the scale-in stabilisation window. */
  recommendations: { at: number; replicas: number }[];
}

export type ScaleReason =
  | 'activation'
  | 'target'
  | 'cooldown'
  | 'stabilization'
  | 'idle'
  | 'fallback'
  | 'read-failed'
  | 'minimum'
  | 'maximum';

export interface ScaleDecision {
  replicas: number;
  reason: ScaleReason;
  active: boolean;
  fallback: boolean;
  backlog?: number;
  state: ScaleState;
}

export type BacklogRead = { ok: true; pending: number; inFlight: number } | { ok: false };

export const initialState = (lastActiveTime?: number): ScaleState => ({
  lastActiveTime,
  failures: 0,
  recommendations: [],
});

/**
 * KEDA's semantics as one pure function. Backlog = pending + in flight.
 * - activation: backlog > activationBacklog makes the pool active (0 -> 1 and lastActiveTime = now);
 * - target: while active, ceil(backlog / targetBacklogPerReplica) replicas (1 <-> N);
 * - cooldown: only towards zero: an inactive pool keeps >= 1 until lastActiveTime + cooldown;
 * - stabilisation: scale-in (N -> M >= 1) goes only to the highest recommendation of the window;
 *   scale-out is immediate;
 * - fallback: after fallbackAfterFailures failed reads in a row, hold fallbackReplicas (if set),
 *   else keep the current count;
 * - bounds: never above maxReplicas, never below minReplicas.
 */
export function decide(
  policy: ScalePolicy,
  current: number,
  read: BacklogRead,
  state: ScaleState,
  now: number,
): ScaleDecision {
  const clamp = (n: number) => Math.min(policy.maxReplicas, Math.max(policy.minReplicas, n));
  if (!read.ok) {
    const failures = state.failures + 1;
    const s = { ...state, failures };
    if (policy.fallbackReplicas !== undefined && failures >= policy.fallbackAfterFailures)
      return {
        replicas: clamp(policy.fallbackReplicas),
        reason: 'fallback',
        active: false,
        fallback: true,
        state: s,
      };
    return {
      replicas: Math.min(current, policy.maxReplicas),
      reason: 'read-failed',
      active: false,
      fallback: false,
      state: s,
    };
  }
  const backlog = read.pending + read.inFlight;
  const active = backlog > policy.activationBacklog;
  const lastActiveTime = active ? now : state.lastActiveTime;
  const perTarget = Math.max(1, Math.ceil(backlog / policy.targetBacklogPerReplica));
  const coolingDown =
    current > 0 && lastActiveTime !== undefined && now < lastActiveTime + policy.cooldownSeconds * 1000;
  let want: number;
  let reason: ScaleReason;
  if (active) {
    want = perTarget;
    reason = current === 0 ? 'activation' : 'target';
  } else if (coolingDown) {
    want = perTarget;
    reason = 'cooldown';
  } else {
    want = 0;
    reason = 'idle';
  }
  let replicas = clamp(want);
  if (replicas > want) reason = 'minimum';
  if (replicas < want) reason = 'maximum';
  const windowStart = now - policy.stabilizationSeconds * 1000;
  const recommendations = [...state.recommendations.filter((r) => r.at > windowStart), { at: now, replicas }];
  // Stabilise scale-in between 1 and N; going to zero is the cooldown's business.
  if (replicas < current && replicas > 0) {
    const highest = Math.max(...recommendations.map((r) => r.replicas));
    const held = Math.min(current, highest);
    if (held > replicas) {
      replicas = held;
      reason = 'stabilization';
    }
  }
  return {
    replicas,
    reason,
    active,
    fallback: false,
    backlog,
    state: { lastActiveTime, failures: 0, recommendations },
  };
}

/**
 * The lastActiveTime (ms) to keep in status, given the one stored there. While a pool stays
 * active, its remembered lastActiveTime moves on every tick; writing each would make a status
 * write per tick for as long as any claim is in flight. Status gets it when there is none yet,
 * when activity ends (the last active moment, so a new leader's cooldown starts where this one's
 * did), and while active at most every half cooldown (at least 1 s apart): a leader that dies mid
 * activity shortens its successor's cooldown by at most half.
 */
export function persistedLastActive(
  stored: number | undefined,
  state: ScaleState,
  active: boolean,
  cooldownSeconds: number,
): number | undefined {
  const last = state.lastActiveTime;
  if (last === undefined) return stored;
  if (stored === undefined) return last;
  // Status keeps whole seconds.
  if (Math.floor(last / 1000) <= Math.floor(stored / 1000)) return stored;
  if (!active) return last;
  return last - stored >= Math.max(1000, cooldownSeconds * 500) ? last : stored;
}
