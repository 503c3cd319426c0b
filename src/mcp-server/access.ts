import type { Artefact } from '../blackboard/types.ts';
import type { TraceCarrier } from '../telemetry/carrier.ts';

/**
 * What the MCP server needs of a Holt. The CLI provides it (src/cli/commands/mcp.ts) from the same
 * functions `holt status|hoard|forage|questions|answer|send|graph` use, for a local instance or
 * `--kube NS/NAME`; this folder knows nothing of Redis, Kubernetes or the Holt file.
 *
 * Each method throws an Error whose message is for a person (what went wrong, what to do): the server
 * hands it to the client as a tool error.
 */
export interface HoltAccess {
  /** Which Holt, for the server's instructions: `local instance demo`, `Holt ns/name`. */
  describe(): string;
  /** A new workflow; the goal artefact's id. `allowDirty`: start even if the git workspace has changes. */
  /** `trace`: the caller's trace context, which the goal continues. */
  startGoal(text: string, allowDirty: boolean, trace?: TraceCarrier): Promise<string>;
  /** What `holt status --json` prints. */
  status(): Promise<Record<string, unknown>>;
  /** Artefacts, oldest first: all, or one workflow's (`goal`: id or prefix of 6+ characters). */
  artefacts(filter: { type?: string; agent?: string; goal?: string }): Promise<Artefact[]>;
  /** One artefact by id or a prefix of 6+ characters. */
  artefact(id: string): Promise<Artefact>;
  /** Questions no Answer cites yet, oldest first. */
  questions(): Promise<Artefact[]>;
  /** The user's Answer; the asking agent resumes. */
  answer(questionId: string, text: string): Promise<{ answerId: string; questionId: string }>;
  /** A message for a living agent through its ingress, as `holt send`. */
  send(role: string, text: string): Promise<{ status: string; id: string }>;
  /** The artefact graph of one workflow as Mermaid, as `holt graph --goal`. */
  graph(goal: string): Promise<string>;
}
