import type { Logger } from '../common/logger.ts';
import { notStarted, type ToolRun } from './result.ts';
import type { ToolRunner } from './runner/runner.ts';

export interface HealthCheckOptions {
  command: string[];
  intervalMs: number;
  timeoutMs: number;
  cwd: string;
  runner: ToolRunner;
}

/**
 * The agent's custom health check (Holt's `health_check`, which Holt never wired): the command runs every
 * interval; exit 0 is healthy. Live (healthz) until the first run finishes, but not ready (readyz)
 * before a run has passed; a run still going is not doubled.
 */
export class CustomHealthCheck {
  private state: { ok: boolean; reason?: string } = { ok: true };
  private timer: NodeJS.Timeout | undefined;
  private running = false;
  private ran = false;
  private readonly opts: HealthCheckOptions;
  private readonly log: Logger;

  constructor(opts: HealthCheckOptions, log: Logger) {
    this.opts = opts;
    this.log = log;
  }

  start(): void {
    void this.runOnce();
    this.timer = setInterval(() => void this.runOnce(), this.opts.intervalMs);
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
  }

  get status(): { ok: boolean; reason?: string } {
    return this.state;
  }

  /** At least one run has finished (its result is in `status`). */
  get checked(): boolean {
    return this.ran;
  }

  async runOnce(): Promise<void> {
    if (this.running) return;
    this.running = true;
    try {
      let r: ToolRun;
      try {
        r = await this.opts.runner.run({
          argv: this.opts.command,
          cwd: this.opts.cwd,
          stdin: '',
          timeoutMs: this.opts.timeoutMs,
          maxBytes: 64 * 1024,
        });
      } catch (e) {
        r = notStarted((e as Error).message);
      }
      const reason = r.spawnError
        ? `health check could not start: ${r.spawnError}`
        : r.timedOut
          ? `health check timed out after ${this.opts.timeoutMs} ms`
          : r.exitCode !== 0
            ? `health check exited with ${r.exitCode ?? r.signal}: ${(r.stderr || r.stdout).trim().slice(0, 200)}`
            : undefined;
      if (reason && this.state.ok) this.log.warn({ event_type: 'health_check_failed', reason });
      if (!reason && !this.state.ok) this.log.info({ event_type: 'health_check_recovered' });
      this.state = reason ? { ok: false, reason } : { ok: true };
      this.ran = true;
    } finally {
      this.running = false;
    }
  }
}
