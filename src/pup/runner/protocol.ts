import { z } from 'zod';
import { FileRequest, FileResult } from './files.ts';

/** One run, as the pup asks for it: no environment of the pup's, only what the run adds. */
export const ToolRequest = z.object({
  argv: z.array(z.string()).min(1, 'needs a command'),
  cwd: z.string().min(1),
  stdin: z.string(),
  timeoutMs: z.number().int().positive(),
  maxBytes: z.number().int().positive(),
  /** A tool's own declared variables (an LLM tool's `env`). */
  env: z.record(z.string(), z.string()).optional(),
  /** The idempotency key the run sees as HOLT_CALL_ID. */
  callId: z.string().optional(),
});
export type ToolRequest = z.infer<typeof ToolRequest>;

/** Whether `rev` is a commit of the repository at `root` (a CodeCommit's check, run where the tools run). */
export const CommitRequest = z.object({ root: z.string().min(1), rev: z.string().max(200) });
export type CommitRequest = z.infer<typeof CommitRequest>;
export const CommitResult = z.object({ ok: z.boolean(), detail: z.string() });
export type CommitResult = z.infer<typeof CommitResult>;

/**
 * A stdio MCP server to start where the tools run (src/llm/mcp): the connection then carries its
 * stdin and stdout, newline-delimited JSON-RPC, until either side ends it.
 */
export const McpStdioRequest = z.object({
  argv: z.array(z.string()).min(1, 'needs a command'),
  cwd: z.string().min(1),
  /** Variables passed through by name from the runner's environment (credentials never). */
  env: z.array(z.string()).default([]),
});
export type McpStdioRequest = z.input<typeof McpStdioRequest>;

/**
 * A message on the runner socket: a run, a file operation, a commit check, or a ping (the pup's
 * readiness). One per connection.
 */
export const RunnerMessage = z.discriminatedUnion('op', [
  z.object({ op: z.literal('run'), request: ToolRequest }),
  z.object({ op: z.literal('file'), request: FileRequest }),
  z.object({ op: z.literal('commit'), request: CommitRequest }),
  z.object({ op: z.literal('ping') }),
  z.object({ op: z.literal('mcp'), request: McpStdioRequest }),
]);
export type RunnerMessage = z.infer<typeof RunnerMessage>;

export const ToolRunResult = z.object({
  exitCode: z.number().int().nullable(),
  signal: z.string().nullable(),
  stdout: z.string(),
  stderr: z.string(),
  timedOut: z.boolean(),
  overflow: z.boolean(),
  spawnError: z.string().optional(),
  durationMs: z.number(),
});

export const RunnerReply = z.discriminatedUnion('op', [
  z.object({ op: z.literal('result'), result: ToolRunResult }),
  z.object({ op: z.literal('file'), result: FileResult }),
  z.object({ op: z.literal('commit'), result: CommitResult }),
  z.object({ op: z.literal('pong') }),
  /** The MCP server started: from here on the connection is its stdio. */
  z.object({ op: z.literal('streaming') }),
  z.object({ op: z.literal('error'), error: z.string() }),
]);
export type RunnerReply = z.infer<typeof RunnerReply>;

/**
 * How long the pup waits for the runner's answer to a file operation, a commit check or a ping, and
 * beyond a run's own timeout: a runner that never answers fails the call instead of wedging the agent.
 */
export const RUNNER_CALL_MS = 60_000;

/** A request line may carry a tool's whole input (the context chain); above this it is refused. */
export const MAX_REQUEST_BYTES = 64 * 1024 * 1024;
