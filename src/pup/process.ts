import { type ChildProcessWithoutNullStreams, spawn } from 'node:child_process';
import { errorMessage } from '../common/errors.ts';
import { notStarted, type ToolRun } from './result.ts';

export interface RunOptions {
  argv: string[];
  cwd: string;
  stdin: string;
  timeoutMs: number;
  /** Cap per stream; going over kills the process and marks the run `overflow`. */
  maxBytes: number;
  env?: NodeJS.ProcessEnv;
  /** Aborting kills the process (shutdown after the grace period). */
  signal?: AbortSignal;
}

/**
 * Runs argv without a shell in its own process group, so a timeout or an abort kills the tool and
 * anything it started, and a Ctrl-C on the pup's terminal does not reach the tool (the pup decides).
 * Never rejects: every outcome is data.
 */
export function runProcess(opts: RunOptions): Promise<ToolRun> {
  const started = performance.now();
  return new Promise<ToolRun>((resolve) => {
    const [cmd, ...args] = opts.argv;
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    const bytes = { out: 0, err: 0 };
    let timedOut = false;
    let overflow = false;
    let spawnError: string | undefined;
    let done = false;
    let child: ChildProcessWithoutNullStreams;
    try {
      child = spawn(cmd as string, args, {
        cwd: opts.cwd,
        env: opts.env ?? process.env,
        stdio: ['pipe', 'pipe', 'pipe'],
        detached: true,
      });
    } catch (e) {
      // spawn throws, rather than emitting 'error', on arguments it cannot pass (a NUL byte, say).
      resolve(notStarted(errorMessage(e), performance.now() - started));
      return;
    }
    const killGroup = () => {
      try {
        if (child.pid) process.kill(-child.pid, 'SIGKILL');
      } catch {
        // already gone
      }
    };
    const timer = setTimeout(() => {
      timedOut = true;
      killGroup();
    }, opts.timeoutMs);
    const onAbort = () => killGroup();
    opts.signal?.addEventListener('abort', onAbort, { once: true });
    const collect = (chunks: Buffer[], which: 'out' | 'err') => (b: Buffer) => {
      if (overflow) return;
      bytes[which] += b.length;
      const total = bytes[which];
      if (total > opts.maxBytes) {
        overflow = true;
        // keep what fits, for the failure report
        chunks.push(b.subarray(0, Math.max(0, b.length - (total - opts.maxBytes))));
        killGroup();
        return;
      }
      chunks.push(b);
    };
    child.stdout.on('data', collect(out, 'out'));
    child.stderr.on('data', collect(err, 'err'));
    // A tool that never reads stdin closes the pipe early; that is not an error of the tool.
    child.stdin.on('error', () => undefined);
    child.stdin.end(opts.stdin);
    const finish = (exitCode: number | null, signal: string | null) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      opts.signal?.removeEventListener('abort', onAbort);
      resolve({
        exitCode,
        signal,
        stdout: Buffer.concat(out).toString('utf8'),
        stderr: Buffer.concat(err).toString('utf8'),
        timedOut,
        overflow,
        spawnError,
        durationMs: performance.now() - started,
      });
    };
    child.on('error', (e) => {
      spawnError = e.message;
      finish(null, null);
    });
    // 'close' waits for the pipes; a background grandchild holding them open must not hang us.
    child.on('exit', (code, sig) => {
      const t = setTimeout(() => {
        child.stdout.destroy();
        child.stderr.destroy();
        finish(code, sig);
      }, 1000);
      child.once('close', () => {
        clearTimeout(t);
        finish(code, sig);
      });
    });
  });
}
