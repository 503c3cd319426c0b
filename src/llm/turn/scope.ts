import type { z } from 'zod';
import { type AgentTool, endingToolNames } from '../../api/agent.ts';
import type { Blackboard } from '../../blackboard/client.ts';
import type { ErrorClass } from '../../blackboard/error-class.ts';
import type { Artefact, Claim, ClaimType } from '../../blackboard/types.ts';
import type { AgentEvents } from '../../bus/events.ts';
import { FenceLostError } from '../../common/errors.ts';
import type { Logger } from '../../common/logger.ts';
import type { Scrubber } from '../../common/secrets.ts';
import type { ToolRunner } from '../../pup/runner/runner.ts';
import type { Fence } from '../../state/schema.ts';
import type { StepStore } from '../../state/steps.ts';
import type { WorkStore } from '../../work/store.ts';
import type { LlmSettings } from '../config.ts';
import type { McpHub } from '../mcp/hub.ts';
import type { LlmAgent } from '../model/agent.ts';
import type { ChatMessage, ToolCall } from '../model/model.ts';
import type { LongMemory } from '../stores/long-memory.ts';
import type { MemoryStore } from '../stores/memory-store.ts';
import type { PlanStore } from '../stores/plan-store.ts';
import type { TurnStore } from '../stores/turn-store.ts';
import { buildToolSet, SUBMIT_RESULT, type ToolSet, type WaitArgs } from '../tools/tools.ts';
import { compacted } from './compaction.ts';
import { describeFields, mayEndWith, type ResultFields, resultProblem } from './contract.ts';
import { type Ctl, type TurnState, transcriptSummary } from './state.ts';

export type Tool = z.output<typeof AgentTool>;

export type TurnEnd =
  | { kind: 'result'; result: { type: string; payload: string; summary: string; structural_type?: string } }
  | { kind: 'failure'; reason: string; transcript: string; errorClass: ErrorClass }
  /** On a Question: resume on its Answer, or at `untilMs` (the wait's deadline) when set. */
  | { kind: 'waiting'; questionId: string; untilMs?: number }
  /** Asynchronous tool calls are out: resume when their results are in or `untilMs` passes. */
  | { kind: 'suspended'; untilMs: number }
  | { kind: 'stale' }
  | { kind: 'aborted' };

/**
 * What a life turn (src/life) brings instead of a claim: its opening (what woke the agent, wrapped in
 * provenance labels), the wait tool that ends it, and the requests of asynchronous tools.
 */
export interface LifeHooks {
  opening(): Promise<{
    messages: ChatMessage[];
    goalId: string;
    goalAtMs: number;
    /** The weakest authority of what woke the agent (Ctl.evidence). */
    evidence: 'agent_note' | 'external_evidence';
    /** What woke it, as text to recall memories by. */
    recallText: string;
  }>;
  /** Stores the model's wait (FenceLostError when the fence is lost). The turn ends after it. */
  wait(a: WaitArgs): Promise<string>;
  /** Sends an asynchronous tool's request (its wait row stored first; FenceLostError when the fence is lost). */
  request(callId: string, tool: Tool, args: Record<string, unknown>): Promise<{ deadlineMs: number }>;
  /** How an asynchronous tool's result is shown to the model (wrapped in its labels). */
  showResult(tool: string, result: unknown): string;
  /** Rings another living agent of the Holt (after a work hand-off). */
  wake?(role: string): void;
}

export interface TurnDeps {
  agent: LlmAgent;
  store: TurnStore;
  steps: StepStore;
  memory: MemoryStore;
  /** A planning agent's plans per goal; without it a plan lives in its turn alone. */
  plans?: PlanStore;
  /** The agent's work items, when it has the work tools (src/work). */
  work?: WorkStore;
  bb: Blackboard;
  settings: LlmSettings;
  instance: string;
  role: string;
  systemPrompt?: string;
  workspace: string;
  fence: Fence;
  claim: Claim;
  claimType: ClaimType;
  target: Artefact;
  /** Assembled only for a fresh turn (a resumed one has its prompt stored). */
  context: () => Promise<Artefact[]>;
  scrub: Scrubber;
  /** Where declared tools run (never with the pup's credentials). */
  runner: ToolRunner;
  /** The agent's MCP servers (src/llm/mcp), when it declares any. */
  mcp?: McpHub;
  events: AgentEvents;
  log: Logger;
  signal: AbortSignal;
  /** A life turn's hooks; absent for a claim's turn. */
  life?: LifeHooks;
  /** Long-term memory (src/memory), when the agent has `llm.memory`. */
  longMemory?: LongMemory;
}

/**
 * Runs a turn's loop, the one place a lost fence is caught: every fenced write throws FenceLostError,
 * and the turn then ends as `stale` (another process owns it now) having written nothing more.
 */
export async function fenced(loop: () => Promise<TurnEnd>): Promise<TurnEnd> {
  try {
    return await loop();
  } catch (e) {
    if (e instanceof FenceLostError) return { kind: 'stale' };
    throw e;
  }
}

export const QUESTION_NS = 'c1d0f5a4-3b2e-4f6a-9d8c-7e6b5a4f3c2d';

/** Outcomes of a tool call that mean the model's output could not be used. */
export const OUTPUT_ERRORS = new Set(['invalid_args', 'unknown_tool', 'invalid_result', 'refused']);

/**
 * What every part of a turn shares: its dependencies, its folded state, and the one way to store a
 * step (`record`). turn.ts is the loop; the files beside it each take one concern of it (calls.ts a
 * tool call, builtins.ts the built-in tools, questions.ts, planning.ts, async-calls.ts, tool-run.ts)
 * as functions of this scope.
 */
export class TurnScope {
  readonly deps: TurnDeps;
  readonly tools: ToolSet;
  /** The fields its result must carry (none for a review, whose payload is a verdict). */
  readonly fields: ResultFields | undefined;
  state: TurnState = { messages: [], ctl: {} as Ctl, nextSeq: 0 };
  chunkSeq = 0;
  constructor(deps: TurnDeps) {
    this.deps = deps;
    const st = deps.settings;
    this.fields = deps.claimType === 'review' ? undefined : st.resultFields;
    this.tools = buildToolSet(st.tools, {
      allowed: st.allowedTools,
      planning: st.planning,
      memory: st.workingMemoryBytes > 0,
      files: st.fileTools,
      work: st.workItems && deps.work !== undefined,
      longMemory: deps.longMemory !== undefined,
      life: deps.life !== undefined,
      submit: mayEndWith(SUBMIT_RESULT, st.mustEndWith),
      resultFields: describeFields(this.fields),
      mcp: deps.mcp?.specs(),
    });
  }
  base() {
    const f = this.deps.fence;
    return { actor_id: f.actorId, turn_id: f.turnId, turn_epoch: f.epoch, at_ms: Date.now() };
  }
  async record(
    kind: string,
    messages: ChatMessage[],
    ctl: Ctl,
    extra: Record<string, unknown> = {},
    toolCallIds: string[] = [],
  ) {
    const metadata = this.deps.scrub.json({ messages, ctl, ...extra });
    // A lost fence throws FenceLostError here (and in every fenced write): Turn.run ends the turn.
    await this.deps.steps.recordStep(this.deps.fence, {
      seq: this.state.nextSeq,
      kind,
      status: extra.error ? 'failed' : 'completed',
      toolCallIds,
      metadata,
      error: typeof extra.error === 'string' ? extra.error : undefined,
    });
    // The plan outlives the turn: each change is saved for the goal, under the same fence.
    const plan = metadata.ctl.plan;
    const { plans } = this.deps;
    if (plans && plan && metadata.ctl.goalId && JSON.stringify(plan) !== JSON.stringify(this.state.ctl.plan))
      await plans.save(this.deps.fence, this.deps.role, metadata.ctl.goalId, plan);
    const compact = extra.compact as { head: number; from: number } | undefined;
    this.state = {
      messages: compact
        ? compacted(this.state.messages, compact, metadata.messages)
        : [...this.state.messages, ...metadata.messages],
      ctl: metadata.ctl,
      nextSeq: this.state.nextSeq + 1,
    };
  }
  failure(reason: string, errorClass: ErrorClass): TurnEnd {
    return { kind: 'failure', reason, transcript: transcriptSummary(this.state.messages), errorClass };
  }
  toolMsg = (call: ToolCall, content: string): ChatMessage => ({
    role: 'tool',
    tool_call_id: call.id,
    content,
  });
  /** One more unusable output in a row; at the bound the turn fails (class model_output). */
  outputError(ctl: Ctl, what: string): Ctl {
    const n = ctl.outputErrors + 1;
    if (n < this.deps.settings.maxOutputErrors) return { ...ctl, outputErrors: n };
    const reason = `the model's output was unusable ${n} times in a row (last: ${what.slice(0, 300)})`;
    return { ...ctl, outputErrors: n, failed: { reason, errorClass: 'model_output' } };
  }
  /**
   * A `terminate` tool has run: whether it ends the turn (it succeeded, the turn may end with it, and
   * its output carries the declared fields), and what the model is told either way.
   */
  termination(
    name: string,
    run: {
      exitCode: number | null;
      timedOut: boolean;
      overflow: boolean;
      spawnError?: string;
      stdout: string;
    },
  ): { note: string; endedBy?: { tool: string; output: string } } {
    const { deps } = this;
    if (!mayEndWith(name, deps.settings.mustEndWith))
      return {
        note: `[the turn goes on: it ends only with ${endingToolNames(deps.settings.mustEndWith).join(' or ')}]`,
      };
    if (run.exitCode !== 0 || run.timedOut || run.overflow || run.spawnError)
      return { note: `[the turn goes on: ${name} did not succeed, so it did not end the turn]` };
    const output = deps.scrub.text(run.stdout.trim());
    const problem = resultProblem(output, this.fields);
    if (problem) return { note: `[the turn goes on: this output cannot be the result: ${problem}]` };
    return { note: '[this output is the result; the turn ends]', endedBy: { tool: name, output } };
  }
}
