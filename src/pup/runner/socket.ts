import { chmodSync, rmSync } from 'node:fs';
import { createConnection, createServer, type Server, type Socket } from 'node:net';
import type { Logger } from '../../common/logger.ts';
import { toolEnvironment } from '../../common/secrets.ts';
import { runProcess } from '../process.ts';
import type { ToolRun } from '../result.ts';
import { FileRequest, type FileResult, fileOp } from './files.ts';
import { MAX_REQUEST_BYTES, RunnerMessage, RunnerReply, type ToolRequest } from './protocol.ts';
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
  constructor(path: string) {
    this.path = path;
  }

  private exchange(msg: RunnerMessage, signal?: AbortSignal): Promise<RunnerReply> {
    return new Promise((resolve, reject) => {
      const sock = createConnection(this.path);
      const onAbort = () => sock.destroy(new Error('aborted'));
      signal?.addEventListener('abort', onAbort, { once: true });
      sock.once('error', (e) => {
        signal?.removeEventListener('abort', onAbort);
        reject(new Error(`tool runner at ${this.path}: ${e.message}`));
      });
      sock.once('connect', () => {
        sock.write(`${JSON.stringify(msg)}\n`);
        readLine(sock, MAX_REQUEST_BYTES * 2).then(
          (line) => {
            signal?.removeEventListener('abort', onAbort);
            const r = RunnerReply.safeParse(JSON.parse(line));
            if (r.success) resolve(r.data);
            else reject(new Error(`tool runner sent an unreadable reply: ${r.error.issues[0]?.message}`));
            sock.destroy();
          },
          (e: Error) => reject(new Error(`tool runner at ${this.path}: ${e.message}`)),
        );
      });
    });
  }

  async run(req: ToolRequest, signal?: AbortSignal): Promise<ToolRun> {
    const started = performance.now();
    let r: RunnerReply;
    try {
      r = await this.exchange({ op: 'run', request: req }, signal);
    } catch (e) {
      // Hung up on purpose: the runner killed the run; report it as a local kill would be.
      if (signal?.aborted) return killedRun(performance.now() - started);
      throw e;
    }
    if (r.op === 'result') return r.result;
    throw new Error(`tool runner refused the run: ${r.op === 'error' ? r.error : r.op}`);
  }

  async file(req: FileRequest): Promise<FileResult> {
    const r = await this.exchange({ op: 'file', request: FileRequest.parse(req) });
    if (r.op === 'file') return r.result;
    throw new Error(`tool runner refused the file operation: ${r.op === 'error' ? r.error : r.op}`);
  }

  async ping(): Promise<void> {
    const r = await this.exchange({ op: 'ping' });
    if (r.op !== 'pong') throw new Error(`tool runner answered ${r.op} to a ping`);
  }
}
