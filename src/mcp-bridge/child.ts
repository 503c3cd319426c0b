import { type ChildProcess, spawn } from 'node:child_process';
import { ReadBuffer, serializeMessage } from '@modelcontextprotocol/sdk/shared/stdio.js';
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';

/** How a stdio server ended: its exit code or signal, or why it could not start. */
export interface ChildEnd {
  code: number | null;
  signal: string | null;
  error?: string;
}

/**
 * One stdio MCP server process, newline-delimited JSON-RPC on its pipes. Its stderr goes to ours (the
 * container's log); a line that is not JSON-RPC is skipped and counted, not fatal (servers print banners).
 */
export class StdioChild {
  readonly proc: ChildProcess;
  private readonly buf = new ReadBuffer();
  private ended: ChildEnd | undefined;
  skipped = 0;
  onmessage?: (m: JSONRPCMessage) => void;
  onend?: (end: ChildEnd) => void;

  constructor(command: string, args: string[], env: NodeJS.ProcessEnv) {
    this.proc = spawn(command, args, { env, stdio: ['pipe', 'pipe', 'inherit'] });
    this.proc.stdout!.on('data', (chunk: Buffer) => {
      try {
        this.buf.append(chunk);
      } catch (e) {
        this.end({ code: null, signal: null, error: (e as Error).message });
        this.proc.kill('SIGKILL');
        return;
      }
      for (;;) {
        let m: JSONRPCMessage | null;
        try {
          m = this.buf.readMessage();
        } catch {
          this.skipped++;
          continue;
        }
        if (m === null) break;
        this.onmessage?.(m);
      }
    });
    this.proc.stdin!.on('error', () => {}); // a dead child's pipe: reported by 'exit'
    this.proc.once('error', (e) => this.end({ code: null, signal: null, error: e.message }));
    this.proc.once('exit', (code, signal) => this.end({ code, signal }));
  }

  get alive(): boolean {
    return this.ended === undefined;
  }

  send(m: JSONRPCMessage): boolean {
    if (!this.alive) return false;
    this.proc.stdin!.write(serializeMessage(m));
    return true;
  }

  stop(): void {
    if (this.alive) this.proc.kill('SIGTERM');
  }

  private end(e: ChildEnd): void {
    if (this.ended) return;
    this.ended = e;
    this.onend?.(e);
  }
}

/** The message a client reads when the server process is gone. */
export function describeEnd(e: ChildEnd): string {
  if (e.error) return `MCP server process failed: ${e.error}`;
  const how = e.signal ? `signal ${e.signal}` : `code ${e.code}`;
  return `MCP server process exited (${how}); the bridge starts a new one for the next session`;
}
