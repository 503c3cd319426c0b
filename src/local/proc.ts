import { type ChildProcess, spawn } from 'node:child_process';
import { mkdirSync, openSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { removeDir } from './tmp.ts';

/**
 * Every server a test starts records its pid under the run's pid directory (set by global-setup),
 * so the global teardown can kill whatever a crashed test file left behind.
 */
export function pidDir(): string | undefined {
  return process.env.HOLT_TEST_PID_DIR;
}

/**
 * A process's start time (clock ticks after boot, /proc/<pid>/stat field 22), undefined when it is gone.
 * With the pid it names one process: pid_max can be 32 768, and a long test run starts tens of thousands
 * of processes, so a pid recorded early may belong to another process later.
 */
export function processStartTime(pid: number): string | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19];
  } catch {
    return undefined;
  }
}

export interface ServerProcess {
  readonly name: string;
  readonly child: ChildProcess;
  readonly logFile: string;
  /** The last lines the process wrote, for error messages. */
  tail(lines?: number): string;
  stop(graceMs?: number): Promise<void>;
}

export interface SpawnServerOptions {
  name: string;
  command: string;
  args: string[];
  dir: string;
  env?: NodeJS.ProcessEnv;
  cwd?: string;
  uid?: number;
  gid?: number;
  /** Its own process group, not waited on: it outlives this process (`make cluster-up`). */
  detached?: boolean;
}

export function spawnServer(opts: SpawnServerOptions): ServerProcess {
  mkdirSync(opts.dir, { recursive: true });
  const logFile = join(opts.dir, `${opts.name}.log`);
  const fd = openSync(logFile, 'a');
  const child = spawn(opts.command, opts.args, {
    cwd: opts.cwd ?? opts.dir,
    env: opts.env ?? process.env,
    stdio: ['ignore', fd, fd],
    uid: opts.uid,
    gid: opts.gid,
    detached: opts.detached,
  });
  if (opts.detached) child.unref();
  const pd = pidDir();
  const pidFile = pd && child.pid ? join(pd, `${child.pid}`) : undefined;
  // The start time too: teardown kills the pid only while it still names this process.
  if (pidFile && child.pid) writeFileSync(pidFile, `${opts.name}\n${processStartTime(child.pid) ?? ''}\n`);
  let exited = child.exitCode !== null;
  const exitedP = new Promise<void>((resolve) => {
    child.once('exit', () => {
      exited = true;
      if (pidFile) rmSync(pidFile, { force: true });
      resolve();
    });
    child.once('error', () => {
      exited = true;
      resolve();
    });
  });
  const tail = (lines = 20): string => {
    try {
      return readFileSync(logFile, 'utf8').trimEnd().split('\n').slice(-lines).join('\n');
    } catch {
      return '';
    }
  };
  return {
    name: opts.name,
    child,
    logFile,
    tail,
    async stop(graceMs = 5000) {
      if (exited) return;
      child.kill('SIGTERM');
      const t = await Promise.race([exitedP.then(() => 'exit'), sleep(graceMs).then(() => 'timeout')]);
      if (t === 'timeout' && !exited) {
        child.kill('SIGKILL');
        await exitedP;
      }
    },
  };
}

/** Polls `probe` until it resolves truthy; fails early if the process dies, with its log tail. */
export async function waitReady(
  proc: ServerProcess,
  probe: () => Promise<boolean>,
  timeoutMs = 30_000,
  intervalMs = 50,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (proc.child.exitCode !== null || proc.child.signalCode !== null) {
      throw new Error(
        `${proc.name} exited (${proc.child.exitCode ?? proc.child.signalCode}) before it was ready:\n${proc.tail()}`,
      );
    }
    try {
      if (await probe()) return;
    } catch {
      // not ready yet
    }
    if (Date.now() > deadline) {
      await proc.stop(1000);
      throw new Error(`${proc.name} not ready after ${timeoutMs} ms:\n${proc.tail()}`);
    }
    await sleep(intervalMs);
  }
}

/** A started server that can be stopped (its temp dir removed unless kept) and restarted in place. */
export interface Restartable {
  proc: ServerProcess;
  stop(): Promise<void>;
  /** Stops the server, leaves it down `downMs` (an outage), and starts it again on the same port and data. */
  restart(downMs?: number): Promise<void>;
}

/** Launches with `launch`, and gives stop/restart over it: the shared shape of the store servers. */
export async function managed<T extends object>(
  launch: () => Promise<ServerProcess>,
  dir: string,
  keep: boolean,
  fields: T,
): Promise<T & Restartable> {
  const server: T & Restartable = {
    ...fields,
    proc: await launch(),
    async stop() {
      await server.proc.stop();
      if (!keep) removeDir(dir);
    },
    async restart(downMs = 0) {
      await server.proc.stop();
      if (downMs > 0) await sleep(downMs);
      server.proc = await launch();
    },
  };
  return server;
}
