import { toolEnvironment } from '../../common/secrets.ts';
import { checkCommit } from '../git.ts';
import { runProcess } from '../process.ts';
import type { ToolRun } from '../result.ts';
import { type FileRequest, type FileResult, fileOp } from './files.ts';
import { localMcpStdio, type McpStdioStream } from './mcp-stdio.ts';
import {
  type CommitRequest,
  type CommitResult,
  type McpStdioRequest,
  RUNNER_CALL_MS,
  type ToolRequest,
} from './protocol.ts';

/**
 * Where the pup's tools, bid scripts and health checks run. Locally a child of the pup with an
 * allowlisted environment; in a pod the agent container's runner, which holds no credential at all.
 */
export interface ToolRunner {
  run(req: ToolRequest, signal?: AbortSignal): Promise<ToolRun>;
  /** A workspace file operation (the LLM's built-in file tools), where the tools run. */
  file(req: FileRequest): Promise<FileResult>;
  /**
   * Whether a CodeCommit's id is a commit of the workspace: git runs where the tools run, hardened, and
   * never in the pup (a tool could have planted a hook in the repository).
   */
  commit(req: CommitRequest): Promise<CommitResult>;
  /** Resolves when runs can be taken (the socket runner answers); rejects otherwise. */
  ping(): Promise<void>;
  /** A stdio MCP server started where the tools run, its stdin and stdout bridged to the pup. */
  mcpStdio?(req: McpStdioRequest): Promise<McpStdioStream>;
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

  /** Bounded like the socket runner's: a file that blocks is the model's error, never a wedged turn. */
  file(req: FileRequest): Promise<FileResult> {
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<FileResult>((resolve) => {
      timer = setTimeout(
        () => resolve({ ok: false, error: `the file operation did not finish within ${RUNNER_CALL_MS} ms` }),
        RUNNER_CALL_MS,
      );
    });
    return Promise.race([fileOp(req), late]).finally(() => clearTimeout(timer));
  }

  /** git gets PATH and nothing else of the pup's environment (src/pup/git.ts). */
  commit(req: CommitRequest): Promise<CommitResult> {
    return checkCommit(req.root, req.rev, { PATH: this.base.PATH });
  }

  async ping(): Promise<void> {}

  /** A child of this process, with a tool's allowlisted environment (never the pup's). */
  mcpStdio(req: McpStdioRequest): Promise<McpStdioStream> {
    return localMcpStdio(req, this.base);
  }
}

/**
 * The workspace at another path where the tools run (`holt up` mounts it at /workspace in an agent's
 * container, while the pup reads it where it is): a run's directory is moved there.
 */
export class WorkspaceMappedRunner implements ToolRunner {
  private readonly inner: ToolRunner;
  private readonly from: string;
  private readonly to: string;
  constructor(inner: ToolRunner, from: string, to: string) {
    this.inner = inner;
    this.from = from.replace(/\/+$/, '');
    this.to = to.replace(/\/+$/, '');
  }

  /** The directory as the runner sees it; one outside the workspace is passed unchanged. */
  mapCwd(cwd: string): string {
    if (cwd === this.from) return this.to || '/';
    return cwd.startsWith(`${this.from}/`) ? this.to + cwd.slice(this.from.length) : cwd;
  }

  run(req: ToolRequest, signal?: AbortSignal): Promise<ToolRun> {
    return this.inner.run({ ...req, cwd: this.mapCwd(req.cwd) }, signal);
  }

  file(req: FileRequest): Promise<FileResult> {
    return this.inner.file({ ...req, root: this.mapCwd(req.root) });
  }

  commit(req: CommitRequest): Promise<CommitResult> {
    return this.inner.commit({ ...req, root: this.mapCwd(req.root) });
  }

  ping(): Promise<void> {
    return this.inner.ping();
  }

  mcpStdio(req: McpStdioRequest): Promise<McpStdioStream> {
    if (!this.inner.mcpStdio) return Promise.reject(new Error('this tool runner cannot start MCP servers'));
    return this.inner.mcpStdio({ ...req, cwd: this.mapCwd(req.cwd) });
  }
}
