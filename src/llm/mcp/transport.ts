import { ReadBuffer, serializeMessage } from '@modelcontextprotocol/sdk/shared/stdio.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';
import type { McpStdioStream } from '../../pup/runner/mcp-stdio.ts';

/** The most a single message from a server may hold before the stream is given up (a runaway server). */
export const MAX_MESSAGE_BYTES = 8 * 1024 * 1024;

/**
 * The SDK's Transport over a stdio server's pipes wherever it runs (the tool runner's connection, or a
 * local runner's child): newline-delimited JSON-RPC, as the SDK's own stdio transport speaks it.
 */
export class StreamTransport implements Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: (message: JSONRPCMessage) => void;
  private readonly buf = new ReadBuffer({ maxBufferSize: MAX_MESSAGE_BYTES });
  private readonly stream: McpStdioStream;
  private closed = false;
  constructor(stream: McpStdioStream) {
    this.stream = stream;
  }

  async start(): Promise<void> {
    const { output } = this.stream;
    output.on('data', (chunk: Buffer) => {
      try {
        this.buf.append(chunk);
      } catch (e) {
        this.onerror?.(e as Error);
        void this.close();
        return;
      }
      for (;;) {
        let msg: JSONRPCMessage | null;
        try {
          msg = this.buf.readMessage();
        } catch (e) {
          // A line that is not JSON-RPC (a server printing to stdout): reported, the rest goes on.
          this.onerror?.(e as Error);
          continue;
        }
        if (!msg) break;
        this.onmessage?.(msg);
      }
    });
    output.resume();
    void this.stream.closed.then(() => this.close());
  }

  send(message: JSONRPCMessage): Promise<void> {
    if (this.closed) return Promise.reject(new Error('the MCP server is gone'));
    return new Promise((resolve, reject) => {
      const ok = this.stream.input.write(serializeMessage(message), (e) => (e ? reject(e) : undefined));
      if (ok) resolve();
      else this.stream.input.once('drain', () => resolve());
    });
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.stream.close();
    this.buf.clear();
    this.onclose?.();
  }
}
