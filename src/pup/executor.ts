import type { NewArtefact } from '../blackboard/client.ts';
import type { Grant } from '../blackboard/grants.ts';
import type { Artefact } from '../blackboard/types.ts';
import type { Fence } from '../state/schema.ts';
import type { BidChoice } from './decide.ts';

/**
 * What the pup core asks of what runs its grants and makes its bids. The command executor
 * (command-executor.ts) is the pup's own; the model-driven loop (src/llm) is another, plugged in by
 * the agent's entry point (src/agent) as a `ModelPlugin`. The core never imports either.
 */

export type Outcome =
  | 'success'
  | 'failure'
  | 'not_granted'
  | 'already_done'
  | 'leased_elsewhere'
  | 'aborted'
  /** LLM turn suspended on a Question until its Answer arrives (src/llm). */
  | 'waiting'
  | 'error';

/**
 * Where a run's artefact goes: by default straight to the blackboard; an inbox worker holds it and
 * writes it under its fence. `onCreated` runs only if the write created it (e.g. the rework event).
 */
export type ArtefactSink = (
  artefact: NewArtefact,
  onCreated: (written: Artefact) => Promise<void>,
) => Promise<void>;

export interface ExecuteOptions {
  sink?: ArtefactSink;
  /** The caller holds an inbox fence: no Redis execution lease. */
  fenced?: boolean;
  /**
   * The inbox fence itself (an inbox worker): an LLM turn runs under it (its steps are gated by it, no
   * lease of its own) and hands its artefact to `sink`, so the commit is the worker's fenced one.
   */
  fence?: Fence;
  /**
   * How the run ended, beyond the outcome: the Question a waiting turn waits on (and until when, if its
   * wait has a deadline), a Failure's reason.
   */
  report?: (r: { waitingOn?: string; waitUntilMs?: number; error?: string }) => void;
}

/** Runs one grant to exactly one artefact (write-once by output id). Never throws: every end is an Outcome. */
export interface GrantExecutor {
  execute(grant: Grant, signal?: AbortSignal, opts?: ExecuteOptions): Promise<Outcome>;
}

/** Decides the bid on a claim's target (a model, a script, a strategy). */
export type Bidder = (target: Artefact) => Promise<BidChoice>;

/**
 * What a model agent plugs into the pup: it bids and/or executes in the command path's place (src/llm's
 * `LlmPlugin`), with connections of its own: `problem` says why it cannot work (for the health probe),
 * `close` ends it.
 */
export interface ModelPlugin {
  executor?: GrantExecutor;
  decideBid: Bidder;
  problem(): string | null;
  close(): Promise<void>;
}
