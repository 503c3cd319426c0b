import { type ChildProcess, spawn } from 'node:child_process';
import { closeSync, mkdirSync, openSync } from 'node:fs';
import { join } from 'node:path';
import type { Writable } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import { backoffDelay } from '../common/backoff.ts';
import { credentialHandoff } from '../common/credentials.ts';
import { errorMessage } from '../common/errors.ts';
import type { Logger } from '../common/logger.ts';
import type { ComponentState } from './instance.ts';
import { freePort } from './ports.ts';
import { classifyExit, decideRestart, type ExitHistory } from './restarts.ts';
import { lastLines } from './worker-exit.ts';

/** One supervised child process (the orchestrator or a pup). */
export interface ComponentSpec {
  name: string;
  kind: ComponentState['kind'];
  role?: string;
  command: string;
  args: string[];
  env: NodeJS.ProcessEnv;
  /** Store URLs and keys: written to the child's descriptor 3, never put in its environment. */
  secrets?: Record<string, string>;
  cwd: string;
  healthPort?: number;
  /** Run before each start (a tools container: remove one a crashed run left behind). */
  prepare?: () => Promise<void>;
  /** Set to a name unique to each start (a worker's inbox lease owner, as a pod name is). */
  identityEnv?: string;
}

/** How one start of a component ended (not a stop the supervisor asked for). */
export interface ComponentExit {
  spec: ComponentSpec;
  /** The start's identityEnv value. */
  identity?: string;
  code: number | null;
  signal: NodeJS.Signals | null;
  logFile: string;
  at: number;
}

interface Running {
  spec: ComponentSpec;
  state: ComponentState;
  child?: ChildProcess;
  startedAt: number;
  exited?: Promise<void>;
  history: ExitHistory;
  /** The last exit's code (null after a signal). */
  lastCode: number | null;
  identity?: string;
}

/** How long a local pup lets its running tool finish on SIGTERM (HOLT_SHUTDOWN_GRACE_MS). */
export const LOCAL_PUP_GRACE_MS = 10_000;

/** A child that stayed up this long has its restart backoff reset. */
const STABLE_MS = 60_000;

/**
 * Keeps components running: restarts one that dies, with exponential backoff, and logs each
 * component to its own file. `onChange` is called whenever a component's state changes.
 */
export class Supervisor {
  private readonly running = new Map<string, Running>();
  private stopping = false;
  private readonly logDir: string;
  private readonly log: Logger;
  private readonly onChange: () => void;
  private readonly onCrash?: (e: ComponentExit) => void;

  /** `onCrash`: a component ended on its own with a non-zero code or a signal. */
  constructor(logDir: string, log: Logger, onChange: () => void, onCrash?: (e: ComponentExit) => void) {
    this.logDir = logDir;
    this.log = log;
    this.onChange = onChange;
    this.onCrash = onCrash;
    mkdirSync(logDir, { recursive: true });
  }

  states(): ComponentState[] {
    return [...this.running.values()].map((r) => r.state);
  }

  add(spec: ComponentSpec): void {
    const state: ComponentState = {
      name: spec.name,
      kind: spec.kind,
      role: spec.role,
      status: 'starting',
      restarts: 0,
      healthPort: spec.healthPort,
      logFile: join(this.logDir, `${spec.name}.log`),
    };
    const r: Running = {
      spec,
      state,
      startedAt: 0,
      history: { configInRow: 0, crashes: [], backoffStep: 0 },
      lastCode: null,
    };
    this.running.set(spec.name, r);
    this.start(r);
  }

  private start(r: Running): void {
    if (!r.spec.prepare) {
      this.spawn(r);
      return;
    }
    r.exited = r.spec.prepare().then(
      () => {
        if (!this.stopping && this.running.get(r.spec.name) === r) this.spawn(r);
        return r.exited;
      },
      (e: unknown) => {
        r.state.status = 'failed';
        r.state.lastExit = `not started: ${errorMessage(e)}`;
        this.onChange();
      },
    );
  }

  private spawn(r: Running): void {
    const fd = openSync(r.state.logFile, 'a');
    const handoff = r.spec.secrets ? credentialHandoff(r.spec.secrets) : undefined;
    r.identity = r.spec.identityEnv ? `${r.spec.name}-${Date.now().toString(36)}` : undefined;
    const identity = r.identity ? { [r.spec.identityEnv as string]: r.identity } : {};
    const child = spawn(r.spec.command, r.spec.args, {
      cwd: r.spec.cwd,
      env: { ...r.spec.env, ...identity, ...handoff?.env },
      stdio: ['ignore', fd, fd, ...(handoff ? (['pipe'] as const) : [])],
    });
    closeSync(fd);
    if (handoff) {
      const pipe = child.stdio[3] as Writable | null;
      pipe?.on('error', () => undefined); // a child that died at once: its exit is handled below
      pipe?.end(handoff.payload);
    }
    r.child = child;
    r.startedAt = Date.now();
    r.state.pid = child.pid;
    r.state.status = 'starting';
    this.onChange();
    r.exited = new Promise((resolve) => {
      child.once('exit', (code, signal) => {
        r.state.lastExit = signal ? `signal ${signal}` : `exit code ${code}`;
        r.lastCode = signal ? null : code;
        r.state.pid = undefined;
        resolve();
        if (!this.stopping && r.child === child && (signal || code !== 0))
          this.onCrash?.({
            spec: r.spec,
            identity: r.identity,
            code,
            signal,
            logFile: r.state.logFile,
            at: Date.now(),
          });
        void this.onExit(r, child);
      });
      child.once('error', (e) => {
        r.state.lastExit = e.message;
      });
    });
  }

  private async onExit(r: Running, child: ChildProcess): Promise<void> {
    if (this.stopping || r.child !== child) {
      r.state.status = 'stopped';
      this.onChange();
      return;
    }
    const now = Date.now();
    const h = r.history;
    if (now - r.startedAt > STABLE_MS) h.backoffStep = 0;
    const kind = classifyExit(r.lastCode);
    h.configInRow = kind === 'config' ? h.configInRow + 1 : 0;
    const d = decideRestart(kind, h, now, (step) => Math.max(250, backoffDelay(step, 1000, 30_000)));
    if (!d.restart) {
      // Restarting cannot help (a setting to fix) or has not (a crash loop): stop, and say why.
      r.state.status = 'failed';
      r.state.lastExit = `${r.state.lastExit}; ${d.reason}`;
      this.log.error(
        { event_type: 'component_given_up', component_name: r.spec.name, reason: d.reason },
        `${r.spec.name}: ${d.reason}`,
      );
      this.onChange();
      return;
    }
    const delay = d.delayMs;
    if (kind === 'crash') h.crashes = [...h.crashes.filter((t) => now - t < 3_600_000), now];
    h.backoffStep++;
    r.state.restarts++;
    r.state.status = 'restarting';
    this.log.warn(
      {
        event_type: 'component_restart',
        component_name: r.spec.name,
        last_exit: r.state.lastExit,
        delay_ms: delay,
      },
      `${r.spec.name} exited (${r.state.lastExit}); restarting in ${delay} ms`,
    );
    this.onChange();
    await sleep(delay);
    if (this.stopping || this.running.get(r.spec.name) !== r) return;
    if (r.spec.healthPort) {
      // The port was free when picked, not necessarily now: a restart takes a fresh one.
      r.spec.healthPort = await freePort();
      r.spec.env = { ...r.spec.env, HOLT_HEALTH_PORT: String(r.spec.healthPort) };
      r.state.healthPort = r.spec.healthPort;
    }
    this.start(r);
  }

  /** Marks a component running once its health endpoint answered. */
  markHealthy(name: string): void {
    const r = this.running.get(name);
    if (r && r.state.status === 'starting') {
      r.state.status = 'running';
      this.onChange();
    }
  }

  /**
   * Waits until every component with a health port answers 200 on /readyz (an agent is ready once
   * its own health check has passed, not merely before it first runs).
   */
  async waitHealthy(timeoutMs: number, signal?: AbortSignal): Promise<string[]> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const pending: string[] = [];
      await Promise.all(
        [...this.running.values()].map(async (r) => {
          if (r.state.status === 'running') return;
          if (!r.spec.healthPort) return this.markHealthy(r.spec.name);
          try {
            const res = await fetch(`http://127.0.0.1:${r.spec.healthPort}/readyz`, {
              signal: AbortSignal.timeout(1000),
            });
            if (res.ok) return this.markHealthy(r.spec.name);
          } catch {
            // not up yet
          }
          pending.push(r.spec.name);
        }),
      );
      if (!pending.length || Date.now() > deadline || signal?.aborted) return pending.sort();
      await sleep(200);
    }
  }

  /** What is known of components that are not healthy: alive or not, restarts, the last line each logged. */
  describe(names: string[]): string {
    return names
      .map((name) => {
        const r = this.running.get(name);
        if (!r) return name;
        const alive = r.child?.exitCode === null ? `pid ${r.child.pid}` : 'not running';
        const last = lastLines(r.state.logFile, 1).slice(0, 300);
        return `${name} (${alive}, ${r.state.restarts} restarts): ${last || 'nothing logged'}`;
      })
      .join('\n');
  }

  /** Keeps re-checking health so a restarted component goes back to running. */
  async watchHealth(signal: AbortSignal): Promise<void> {
    while (!signal.aborted) {
      await sleep(1000, undefined, { signal }).catch(() => undefined);
      if (!this.stopping) await this.waitHealthy(0);
    }
  }

  names(): string[] {
    return [...this.running.keys()];
  }

  /** Stops one component for good (scale-in): SIGTERM, so a worker drains; SIGKILL after the grace. */
  async remove(name: string, graceMs = 30_000): Promise<void> {
    const r = this.running.get(name);
    if (!r) return;
    this.running.delete(name);
    const child = r.child;
    r.child = undefined; // onExit then records a stop, not a crash to restart
    child?.kill('SIGTERM');
    const t = await Promise.race([
      (r.exited ?? Promise.resolve()).then(() => 'done'),
      sleep(graceMs).then(() => 'timeout'),
    ]);
    if (t === 'timeout') child?.kill('SIGKILL');
    this.onChange();
  }

  /**
   * SIGTERM everything (in reverse start order, agents before the orchestrator), SIGKILL after the grace.
   * The grace outlasts the pups' own (LOCAL_PUP_GRACE_MS), so a pup always gets to stop its tool first.
   */
  async stopAll(graceMs = LOCAL_PUP_GRACE_MS + 5_000): Promise<void> {
    this.stopping = true;
    const all = [...this.running.values()].reverse();
    for (const r of all) r.child?.kill('SIGTERM');
    const done = Promise.all(all.map((r) => r.exited));
    const t = await Promise.race([done.then(() => 'done'), sleep(graceMs).then(() => 'timeout')]);
    if (t === 'timeout') {
      for (const r of all) if (r.state.pid) r.child?.kill('SIGKILL');
      await done;
    }
  }
}
