import { type ChildProcessByStdio, spawn } from 'node:child_process';
import { createConnection, type Socket } from 'node:net';
import type { Readable, Writable } from 'node:stream';
import { errorMessage } from '../../common/errors.ts';
import { LLM_KEY_VARS, STORE_URL_VARS, toolEnvironment } from '../../common/secrets.ts';
import { McpStdioRequest, RUNNER_CALL_MS, RunnerReply } from './protocol.ts';

/**
 * A stdio MCP server's pipes as the pup holds them: the server's stdin (`input`) and stdout (`output`),
 * whether they are a child's (local runner) or a runner connection's. `closed` resolves with why it ended.
 */
export interface McpStdioStream {
  input: Writable;
  output: Readable;
  close(): void;
  closed: Promise<string>;
}

/** Never passed to an MCP server, whatever its `env` names: the pup's credentials. */
const NEVER = new Set([...LLM_KEY_VARS, ...STORE_URL_VARS, 'PGPASSWORD']);

/** A stdio server's environment: a tool's allowlist, plus the names it declares (never a credential). */
export function mcpEnvironment(base: NodeJS.ProcessEnv, names: string[]): Record<string, string> {
  const extra: Record<string, string> = {};
  for (const n of names) {
    const v = base[n];
    if (v !== undefined && !NEVER.has(n)) extra[n] = v;
  }
  return toolEnvironment(base, extra);
}

type Child = ChildProcessByStdio<Writable, Readable, null>;

/** Starts the server in its own process group; resolves once it runs, rejects when it cannot start. */
export function spawnMcpServer(req: McpStdioRequest, base: NodeJS.ProcessEnv): Promise<Child> {
  const r = McpStdioRequest.parse(req);
  return new Promise((resolve, reject) => {
    let child: Child;
    try {
      child = spawn(r.argv[0] as string, r.argv.slice(1), {
        cwd: r.cwd,
        env: mcpEnvironment(base, r.env),
        // stderr is the server's own diagnostics: not ours to carry (it could be anything).
        stdio: ['pipe', 'pipe', 'ignore'],
        detached: true,
      });
    } catch (e) {
      reject(new Error(`cannot start ${r.argv[0]}: ${errorMessage(e)}`));
      return;
    }
    child.once('error', (e) => reject(new Error(`cannot start ${r.argv[0]}: ${e.message}`)));
    child.once('spawn', () => resolve(child));
  });
}

/** Kills the server and whatever it started. */
export function killGroup(child: { pid?: number | undefined }): void {
  try {
    if (child.pid) process.kill(-child.pid, 'SIGKILL');
  } catch {
    // already gone
  }
}

const exitOf = (child: Child): Promise<string> =>
  new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null)
      resolve(`the server exited (${child.exitCode ?? child.signalCode})`);
    else child.once('exit', (code, sig) => resolve(`the server exited (${code ?? sig})`));
  });

/** The local runner's side: the server is a child of this process, with the allowlisted environment. */
export async function localMcpStdio(req: McpStdioRequest, base: NodeJS.ProcessEnv): Promise<McpStdioStream> {
  const child = await spawnMcpServer(req, base);
  child.stdin.on('error', () => undefined); // a dead server's EPIPE is reported by `closed`
  return { input: child.stdin, output: child.stdout, close: () => killGroup(child), closed: exitOf(child) };
}

/**
 * The runner server's side of an `mcp` request: start the server, say so, then bridge the connection
 * to its stdin and stdout. The connection closing kills the server; the server exiting ends it.
 */
export async function serveMcpStdio(
  sock: Socket,
  req: McpStdioRequest,
  base: NodeJS.ProcessEnv,
): Promise<void> {
  sock.pause(); // nothing read is lost while the server starts: pipe() below resumes
  let child: Child;
  try {
    child = await spawnMcpServer(req, base);
  } catch (e) {
    sock.end(`${JSON.stringify({ op: 'error', error: errorMessage(e) } satisfies RunnerReply)}\n`);
    return;
  }
  sock.once('close', () => killGroup(child));
  sock.on('error', () => killGroup(child));
  child.stdin.on('error', () => sock.destroy());
  child.once('exit', () => sock.end());
  sock.write(`${JSON.stringify({ op: 'streaming' } satisfies RunnerReply)}\n`);
  sock.pipe(child.stdin);
  child.stdout.pipe(sock, { end: false });
}

/**
 * The pup's side over the runner socket: ask for the server, wait for `streaming` (or the refusal),
 * then the socket is the server's stdio. Bytes that came with the answer are put back for the reader.
 */
export function socketMcpStdio(
  path: string,
  req: McpStdioRequest,
  deadlineMs = RUNNER_CALL_MS,
): Promise<McpStdioStream> {
  return new Promise((resolve, reject) => {
    const sock = createConnection(path);
    const chunks: Buffer[] = [];
    const fail = (e: Error) => {
      clearTimeout(timer);
      sock.destroy();
      reject(new Error(`tool runner at ${path}: ${e.message}`));
    };
    const timer = setTimeout(
      () => fail(new Error(`no answer to the mcp request within ${deadlineMs} ms`)),
      deadlineMs,
    );
    const onData = (b: Buffer) => {
      const nl = b.indexOf(10);
      if (nl < 0) {
        chunks.push(b);
        if (chunks.reduce((n, c) => n + c.length, 0) > 64 * 1024) fail(new Error('answer too long'));
        return;
      }
      sock.pause();
      sock.off('data', onData).off('error', fail).off('end', onEnd);
      clearTimeout(timer);
      const rest = b.subarray(nl + 1);
      if (rest.length) sock.unshift(rest);
      let r: ReturnType<typeof RunnerReply.safeParse>;
      try {
        r = RunnerReply.safeParse(JSON.parse(Buffer.concat([...chunks, b.subarray(0, nl)]).toString('utf8')));
      } catch (e) {
        return fail(new Error(`sent an unreadable reply: ${errorMessage(e)}`));
      }
      if (!r.success || r.data.op !== 'streaming')
        return fail(new Error(r.success && r.data.op === 'error' ? r.data.error : 'refused the mcp request'));
      const closed = new Promise<string>((res) =>
        sock.once('close', () => res('the runner connection closed')),
      );
      sock.on('error', () => undefined); // reported by `closed`
      resolve({ input: sock, output: sock, close: () => sock.destroy(), closed });
    };
    const onEnd = () => fail(new Error('connection closed before an answer'));
    sock.once('connect', () => sock.write(`${JSON.stringify({ op: 'mcp', request: req })}\n`));
    sock.on('data', onData).once('error', fail).once('end', onEnd);
  });
}
