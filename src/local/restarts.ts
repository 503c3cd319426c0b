import { EXIT_CONFIG } from '../common/config.ts';

/** After this many configuration errors in a row a component is given up on: restarting cannot help. */
export const CONFIG_TRIES = 3;
/** At most this many crash restarts in any hour; then the component is given up on, and says why. */
export const CRASHES_PER_HOUR = 30;

export type ExitKind = 'config' | 'crash';

/** A configuration error (exit EXIT_CONFIG, one line naming the setting), or anything else. */
export function classifyExit(code: number | null): ExitKind {
  return code === EXIT_CONFIG ? 'config' : 'crash';
}

/** What to do after an exit: restart after `delayMs`, or give up and say why. Pure. */
export type RestartDecision = { restart: true; delayMs: number } | { restart: false; reason: string };

export interface ExitHistory {
  /** Configuration errors in a row (reset by any other exit). */
  configInRow: number;
  /** When each crash restart of the last hour happened (ms). */
  crashes: number[];
  /** Restarts since the component was last stable (drives the backoff). */
  backoffStep: number;
}

export function decideRestart(
  kind: ExitKind,
  h: ExitHistory,
  now: number,
  backoff: (step: number) => number,
): RestartDecision {
  if (kind === 'config') {
    if (h.configInRow >= CONFIG_TRIES)
      return {
        restart: false,
        reason: `configuration error ${h.configInRow} times in a row (exit ${EXIT_CONFIG}): fix the setting its log names, then holt up again`,
      };
    return { restart: true, delayMs: backoff(h.backoffStep) };
  }
  const lastHour = h.crashes.filter((t) => now - t < 3_600_000);
  if (lastHour.length >= CRASHES_PER_HOUR)
    return {
      restart: false,
      reason: `crashed ${lastHour.length} times in the last hour: given up (see its log)`,
    };
  return { restart: true, delayMs: backoff(h.backoffStep) };
}
