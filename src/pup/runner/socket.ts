import { chmodSync, rmSync } from 'node:fs';
import { createConnection, createServer, type Server, type Socket } from 'node:net';
import type { Logger } from '../../common/logger.ts';
import { toolEnvironment } from '../../common/secrets.ts';
import { checkCommit } from '../git.ts';
import { runProcess } from '../process.ts';
import type { ToolRun } from '../result.ts';
import { FileRequest, type FileResult, fileOp } from './files.ts';
import { type McpStdioStream, serveMcpStdio, socketMcpStdio } from './mcp-stdio.ts';
import {
  type CommitRequest,
  type CommitResult,
  MAX_REQUEST_BYTES,
  type McpStdioRequest,
  RUNNER_CALL_MS,
  RunnerMessage,
  RunnerReply,
  type ToolRequest,
} from './protocol.ts';
import type { ToolRunner } from './runner.ts';

/** Reads one newline-terminated JSON line of at most `max` bytes. */
function readLine(sock: Socket, max: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const onData = (b: Buffer) => {
      const nl = b.indexOf(10);
      const part = nl < 0 ? b : b.subarray(0, nl);
      size += part.length;
      if (size > max) return done(new Error(`message over ${max} bytes`));
      chunks.push(part);
      if (nl >= 0) done(undefined, Buffer.concat(chunks).toString('utf8'));
    };
    const onEnd = () => done(new Error('connection closed before a full message'));
    const done = (e?: Error, line?: string) => {
      sock.off('data', onData).off('end', onEnd).off('error', done);
      if (e) reject(e);
      else resolve(line as string);
    };
    sock.on('data', onData).once('end', onEnd).once('error', done);
  });
}

const send = (sock: Socket, r: RunnerReply) => sock.end(`${JSON.stringify(r)}\n`);

/**
 * The agent container's side (`holt tool-runner`): runs what the pup asks, one run per connection,
 * with its own credential-free environment through the same allowlist. The pup hanging up (its
 * abort) kills the run's process group.
 */
export async function startRunnerServer(opts: {
  socket: string;
  env: NodeJS.ProcessEnv;
  log: Logger;
}): Promise<Server> {
  rmSync(opts.socket, { force: true });
  const server = createServer((sock) => {
    void (async () => {
      let msg: RunnerMessage;
      try {
        const parsed = RunnerMessage.safeParse(JSON.parse(await readLine(sock, MAX_REQUEST_BYTES)));
        if (!parsed.success)
          return send(sock, { op: 'error', error: parsed.error.issues[0]?.message ?? 'bad request' });
        msg = parsed.data;
      } catch (e) {
        return send(sock, { op: 'error', error: `bad request: ${(e as Error).message}` });
      }
      if (msg.op === 'ping') return send(sock, { op: 'pong' });
      if (msg.op === 'file') return send(sock, { op: 'file', result: await fileOp(msg.request) });
      if (msg.op === 'commit')
        return send(sock, {
          op: 'commit',
          result: await checkCommit(msg.request.root, msg.request.rev, { PATH: opts.env.PATH }),
        });
      if (msg.op === 'mcp') return serveMcpStdio(sock, msg.request, opts.env);
      const req = msg.request;
      const abort = new AbortController();
      sock.once('close', () => abort.abort());
      sock.on('error', () => abort.abort());
      const result = await runProcess({
        argv: req.argv,
        cwd: req.cwd,
        stdin: req.stdin,
        timeoutMs: req.timeoutMs,
        maxBytes: req.maxBytes,
        env: toolEnvironment(opts.env, req.env, req.callId),
        signal: abort.signal,
      });
      if (!sock.destroyed) send(sock, { op: 'result', result });
    })().catch((e: unknown) => {
      opts.log.warn({ event_type: 'runner_connection_failed', error: String(e) });
      sock.destroy();
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.socket, () => resolve());
  });
  // Only this user (the pod's one uid) may ask for runs.
  chmodSync(opts.socket, 0o600);
  return server;
}

/** The runner did not answer in time (it stays up; the connection is closed). */
export class RunnerTimeout extends Error {
  constructor(op: string, ms: number) {
    super(`the tool runner did not answer the ${op} request within ${ms} ms`);
  }
}

const killedRun = (durationMs: number): ToolRun => ({
  exitCode: null,
  signal: 'SIGKILL',
  stdout: '',
  stderr: '',
  timedOut: false,
  overflow: false,
  durationMs,
});

/** The pup's side: each run on its own connection; an abort hangs up, which kills the run. */
export class SocketToolRunner implements ToolRunner {
  private readonly path: string;
  private readonly callMs: number;
  /** `callMs`: the deadline of a file operation, a commit check or a ping, and a run's beyond its own timeout. */
  constructor(path: string, callMs = RUNNER_CALL_MS) {
    this.path = path;
    this.callMs = callMs;
  }

  /**
   * One request, one reply, within `deadlineMs`: a runner that accepts and never answers (wedged on a
   * file, say) fails the call, and hanging up frees whatever it was doing for us.
   */
  private exchange(msg: RunnerMessage, deadlineMs: number, signal?: AbortSignal): Promise<RunnerReply> {
    return new Promise((resolve, reject) => {
      const sock = createConnection(this.path);
      let settled = false;
      const finish = (e: Error | undefined, r?: RunnerReply) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
        sock.destroy();
        if (e instanceof RunnerTimeout) reject(e);
        else if (e) reject(new Error(`tool runner at ${this.path}: ${e.message}`));
        else resolve(r as RunnerReply);
      };
      const timer = setTimeout(() => finish(new RunnerTimeout(msg.op, deadlineMs)), deadlineMs);
      const onAbort = () => finish(new Error('aborted'));
      signal?.addEventListener('abort', onAbort, { once: true });
      sock.once('error', (e) => finish(e));
      sock.once('connect', () => {
        sock.write(`${JSON.stringify(msg)}\n`);
        readLine(sock, MAX_REQUEST_BYTES * 2).then(
          (line) => {
            let r: ReturnType<typeof RunnerReply.safeParse>;
            try {
              r = RunnerReply.safeParse(JSON.parse(line));
            } catch (e) {
              return finish(new Error(`sent an unreadable reply: ${(e as Error).message}`));
            }
            if (r.success) finish(undefined, r.data);
            else finish(new Error(`sent an unreadable reply: ${r.error.issues[0]?.message}`));
          },
          (e: Error) => finish(e),
        );
      });
    });
  }

  async run(req: ToolRequest, signal?: AbortSignal): Promise<ToolRun> {
    const started = performance.now();
    let r: RunnerReply;
    try {
      r = await this.exchange({ op: 'run', request: req }, req.timeoutMs + this.callMs, signal);
    } catch (e) {
      // Hung up on purpose: the runner killed the run; report it as a local kill would be.
      if (signal?.aborted) return killedRun(performance.now() - started);
      throw e;
    }
    if (r.op === 'result') return r.result;
    throw new Error(`tool runner refused the run: ${r.op === 'error' ? r.error : r.op}`);
  }

  /** A file operation past its deadline is the model's error (a file that blocks), not the turn's. */
  async file(req: FileRequest): Promise<FileResult> {
    let r: RunnerReply;
    try {
      r = await this.exchange({ op: 'file', request: FileRequest.parse(req) }, this.callMs);
    } catch (e) {
      if (e instanceof RunnerTimeout) return { ok: false, error: e.message };
      throw e;
    }
    if (r.op === 'file') return r.result;
    throw new Error(`tool runner refused the file operation: ${r.op === 'error' ? r.error : r.op}`);
  }

  async commit(req: CommitRequest): Promise<CommitResult> {
    const r = await this.exchange({ op: 'commit', request: req }, this.callMs);
    if (r.op === 'commit') return r.result;
    throw new Error(`tool runner refused the commit check: ${r.op === 'error' ? r.error : r.op}`);
  }

  async ping(): Promise<void> {
    const r = await this.exchange({ op: 'ping' }, this.callMs);
    if (r.op !== 'pong') throw new Error(`tool runner answered ${r.op} to a ping`);
  }

  /** The server runs in the agent container; this connection is its stdio. */
  mcpStdio(req: McpStdioRequest): Promise<McpStdioStream> {
    return socketMcpStdio(this.path, req, this.callMs);
  }
}
