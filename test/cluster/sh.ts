import { execFileSync } from 'node:child_process';

export interface RunOptions {
  input?: string | Buffer;
  /** Return '' instead of throwing when the command fails (tear-down of what may be gone already). */
  allowFail?: boolean;
  env?: NodeJS.ProcessEnv;
  timeoutMs?: number;
}

/** Runs a command to completion; throws with the command and its stderr when it fails. */
export function sh(cmd: string, args: string[], opts: RunOptions = {}): string {
  try {
    return execFileSync(cmd, args, {
      input: opts.input,
      env: opts.env,
      encoding: 'utf8',
      stdio: ['pipe', 'pipe', 'pipe'],
      maxBuffer: 64 << 20,
      timeout: opts.timeoutMs ?? 120_000,
    });
  } catch (e) {
    if (opts.allowFail) return '';
    const err = e as { stderr?: string; message: string };
    throw new Error(`${cmd} ${args.join(' ')}: ${(err.stderr ?? '').trim() || err.message}`);
  }
}
