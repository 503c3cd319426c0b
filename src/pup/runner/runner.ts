import { toolEnvironment } from '../../common/secrets.ts';
import { runProcess } from '../process.ts';
import type { ToolRun } from '../result.ts';
import type { ToolRequest } from './protocol.ts';

/**
 * Where the pup's tools, bid scripts and health checks run. Locally a child of the pup with an
 * allowlisted environment; in a pod the agent container's runner, which holds no credential at all.
 */
export interface ToolRunner {
  run(req: ToolRequest, signal?: AbortSignal): Promise<ToolRun>;
  /** Resolves when runs can be taken (the socket runner answers); rejects otherwise. */
  ping(): Promise<void>;
}

/** Runs in this process's children; `base` is the environment the allowlist is taken from. */
export class LocalToolRunner implements ToolRunner {
  private readonly base: NodeJS.ProcessEnv;
  constructor(base: NodeJS.ProcessEnv) {
    this.base = base;
  }

  run(req: ToolRequest, signal?: AbortSignal): Promise<ToolRun> {
    return runProcess({
      argv: req.argv,
      cwd: req.cwd,
      stdin: req.stdin,
      timeoutMs: req.timeoutMs,
      maxBytes: req.maxBytes,
      env: toolEnvironment(this.base, req.env, req.callId),
      signal,
    });
  }

  async ping(): Promise<void> {}
}
