import type { NatsConnection } from '@nats-io/transport-node';
import { z } from 'zod';
import { callRemoteAgent } from '../a2a/client.ts';
import type { AgentTool } from '../api/agent.ts';
import type { Artefact, Claim } from '../blackboard/types.ts';
import { noAgentEvents } from '../bus/events.ts';
import { lifeWakeSubject, REPLY_ID, toolRequestSubject } from '../bus/subjects.ts';
import { newReplyId, publishToolRequest } from '../bus/tools.ts';
import { labelsOf, runtimeLabels, wrapMessage } from '../life/labels.ts';
import type { LifeTurnEnd } from '../life/loop.ts';
import { lifeOpening } from '../life/opening.ts';
import type { Delivery, LifeStore } from '../life/store.ts';
import { CancelledResult } from '../life/tasks.ts';
import { type MemoryAuthority, memoryAuthority, weaker } from '../memory/rank.ts';
import type { Fence } from '../state/schema.ts';
import { traceFieldsOf } from '../telemetry/carrier.ts';
import type { LlmExecutorDeps } from './executor.ts';
import { renderArgv, type WaitArgs } from './tools/tools.ts';
import { describeItem } from './tools/work-tools.ts';
import { type LifeHooks, Turn } from './turn/turn.ts';

type Tool = z.output<typeof AgentTool>;

/**
 * What an asynchronous call asked (turn_waiting_tools.request): enough to run it again after a restart,
 * with the NATS call's reply id, so the request sent again names the same reply subject.
 */
const AsyncRequest = z.object({
  via: z.enum(['nats', 'command', 'a2a']),
  args: z.record(z.string(), z.unknown()),
  reply: z.string().regex(REPLY_ID).optional(),
});
type AsyncRequest = z.infer<typeof AsyncRequest>;

/**
 * Life turns of an LLM agent (src/life): the ReAct turn (turn.ts) opened with what woke the agent
 * instead of a claim, ending with `wait` or text, its asynchronous tools sent over NATS or run as
 * supervised background commands. `poke` wakes the agent's loop when a background command ends.
 */
export class LifeTurns {
  private readonly deps: LlmExecutorDeps;
  private readonly life: LifeStore;
  private readonly nc: NatsConnection | undefined;
  /** Background commands running, by `turnId:callId`: each can be aborted alone (a cancel) or all (a stop). */
  private readonly tasks = new Map<
    string,
    { turnId: string; callId: string; abort: AbortController; done: Promise<void> }
  >();
  /** Aborted when the pup stops: its background commands are killed, and run again by the next pup. */
  private readonly stopping = new AbortController();
  poke: () => void = () => undefined;

  constructor(d: LlmExecutorDeps, life: LifeStore, nc?: NatsConnection) {
    this.deps = d;
    this.life = life;
    this.nc = nc;
  }

  async run(fence: Fence, delivery: Delivery | undefined, signal: AbortSignal): Promise<LifeTurnEnd> {
    const d = this.deps;
    const { cfg } = d;
    const at = Date.now();
    // A life turn answers no claim: its turn id stands in for the claim and target ids in events.
    const claim: Claim = {
      id: fence.turnId,
      artefact_id: fence.turnId,
      status: 'complete',
      granted_review_agents: [],
      granted_parallel_agents: [],
      granted_exclusive_agent: cfg.role,
      // Its span continues the trace its first traced message came with (the ingress's caller's).
      ...traceFieldsOf(delivery?.trace ?? {}),
    };
    const target: Artefact = {
      id: fence.turnId,
      logical_id: fence.turnId,
      version: 1,
      structural_type: 'Standard',
      type: 'LifeTurn',
      payload: '',
      source_artefacts: [],
      produced_by_role: cfg.role,
      created_at_ms: at,
    };
    const end = await new Turn({
      agent: d.agent,
      store: d.store,
      steps: d.steps,
      memory: d.memory,
      plans: d.plans,
      work: d.work,
      bb: d.bb,
      settings: d.settings,
      instance: cfg.instance,
      role: cfg.role,
      systemPrompt: cfg.promptExecution,
      workspace: cfg.workspace,
      fence,
      claim,
      claimType: 'exclusive',
      target,
      context: async () => [],
      scrub: d.scrub,
      runner: cfg.runner,
      mcp: d.mcp,
      longMemory: d.longMemory,
      events: d.events ?? noAgentEvents,
      log: d.log.child({ turn_id: fence.turnId, life: true }),
      signal,
      life: this.hooks(fence, delivery),
    }).run();
    switch (end.kind) {
      case 'result':
        return {
          kind: 'done',
          result: { summary: d.scrub.text(end.result.summary), payload: d.scrub.text(end.result.payload) },
        };
      case 'failure':
        d.countFailure?.(end.errorClass);
        return { kind: 'failed', error: `${end.errorClass}: ${d.scrub.text(end.reason)}` };
      case 'suspended':
        return { kind: 'suspended' };
      case 'waiting':
        return { kind: 'failed', error: 'a life turn cannot wait on a question' };
      case 'stale':
      case 'aborted':
        return { kind: end.kind };
    }
  }

  private hooks(fence: Fence, given: Delivery | undefined): LifeHooks {
    const { deps: d, life } = this;
    const { cfg } = d;
    const role = cfg.role;
    return {
      opening: async () => {
        const delivery = given ??
          (await life.deliveryOf(fence.turnId)) ?? { messageIds: [], waits: [], why: 'resumed' };
        const [messages, waits, open, current, memory] = await Promise.all([
          life.messages(delivery.messageIds),
          life.waits(delivery.waits.map((w) => w.id)),
          d.work ? d.work.list(cfg.instance, role) : [],
          d.work?.current(cfg.instance, role),
          d.settings.workingMemoryBytes > 0 ? d.memory.memory(cfg.instance, role) : undefined,
        ]);
        const tick = delivery.tick ? open.find((i) => i.id === delivery.tick?.itemId) : undefined;
        const now = Date.now();
        const o = lifeOpening({
          role,
          system: cfg.promptExecution,
          delivery,
          messages,
          waits,
          items: { tick, current, open },
          describe: (i) => describeItem(i, now),
          memory,
        });
        const goal = tick ?? current;
        const said = messages.filter((m) => m.kind === 'message');
        return {
          messages: [
            { role: 'system', content: o.system },
            { role: 'user', content: o.user },
          ],
          goalId: goal ? `item:${goal.id}` : `life:${fence.turnId}`,
          goalAtMs: goal?.createdAtMs ?? now,
          evidence: said
            .map((m) => memoryAuthority(m.labels.authority))
            .reduce<MemoryAuthority>(weaker, 'agent_note'),
          recallText: [...said.map((m) => m.body ?? ''), goal?.objective ?? ''].join('\n').trim(),
        };
      },
      wait: async (a: WaitArgs) => {
        const itemId = a.item_id ?? (d.work ? (await d.work.current(cfg.instance, role))?.id : undefined);
        if (a.item_id && d.work && !(await d.work.get(cfg.instance, role, a.item_id)))
          return `error: no work item ${a.item_id} of ${role}`;
        const deadlineMs = a.seconds === undefined ? undefined : Date.now() + a.seconds * 1000;
        const on =
          a.on ?? (a.for === 'timer' ? `${a.seconds} s` : a.for === 'operator' ? 'an operator' : 'a message');
        await life.addWait(fence, role, {
          kind: a.for,
          on,
          ...(deadlineMs ? { deadlineMs } : {}),
          ...(itemId ? { itemId } : {}),
        });
        const until = deadlineMs ? ` until ${new Date(deadlineMs).toISOString()}` : '';
        return `waiting for ${a.for === 'timer' ? 'the timer' : a.for === 'operator' ? 'an operator' : 'a message'} "${on}"${until}${itemId ? ` (work item ${itemId} waits too)` : ''}; the turn ends now`;
      },
      request: async (callId, tool, args) => {
        const via = tool.async ?? 'command';
        const deadlineMs = Date.now() + tool.asyncTimeoutSeconds * 1000;
        const asked: AsyncRequest = { via, args, ...(via === 'nats' ? { reply: newReplyId() } : {}) };
        await d.steps.waitTool(fence, {
          toolCallId: callId,
          toolName: tool.name,
          resumeDeadlineMs: tool.asyncTimeoutSeconds * 1000,
          request: asked,
        });
        // A resumed turn asking again keeps the first request (and its reply id): read what is stored.
        const row = (await d.steps.toolWaits(fence.turnId)).find((w) => w.toolCallId === callId);
        const stored = AsyncRequest.safeParse(row?.request);
        this.send(fence.turnId, callId, tool, stored.success ? stored.data : asked, deadlineMs);
        return { deadlineMs };
      },
      wake: (other) => this.nc?.publish(lifeWakeSubject(cfg.instance, other)),
      showResult: (tool, result) => {
        const cancelled = CancelledResult.safeParse(result);
        if (cancelled.success)
          return wrapMessage(
            runtimeLabels('system'),
            `Cancellation report: your call of ${tool} was ${cancelled.data.error} before it answered; this is not its answer. Go on without it, or call ${tool} again if it is still needed.`,
          );
        const t = d.settings.tools.find((x) => x.name === tool);
        const r = (result ?? {}) as { ok?: boolean; output?: string; error?: string };
        const [surface, admission] =
          t?.async === 'nats'
            ? [toolRequestSubject(cfg.instance, tool), 'tool service']
            : t?.async === 'a2a'
              ? [`A2A ${t.a2a?.url ?? ''}`, 'remote A2A agent']
              : [`background command ${tool}`, 'tool runner'];
        const body =
          r.ok === false ? `error: ${r.error ?? 'the tool failed'}\n${r.output ?? ''}` : (r.output ?? '');
        return wrapMessage(labelsOf('task', 'message', surface, admission), body);
      },
    };
  }

  /** Sends an asynchronous call: a NATS request, a remote A2A agent's call, or a background command whose end is recorded. */
  private send(turnId: string, callId: string, tool: Tool, req: AsyncRequest, deadlineMs: number): void {
    const d = this.deps;
    const { cfg } = d;
    if (req.via === 'nats') {
      const why = !this.nc ? 'no NATS connection' : !req.reply ? 'its call has no reply id' : undefined;
      if (!this.nc || !req.reply) {
        d.log.warn({ event_type: 'tool_request_unsent', tool: tool.name, reason: why });
        return; // the deadline gives the model a timeout report
      }
      publishToolRequest(
        this.nc,
        {
          instance: cfg.instance,
          role: cfg.role,
          turn_id: turnId,
          tool_call_id: callId,
          tool: tool.name,
          args: req.args,
          deadline_ms: deadlineMs,
        },
        req.reply,
      );
      return;
    }
    const key = `${turnId}:${callId}`;
    if (this.tasks.has(key)) return;
    if (req.via === 'a2a') {
      this.callRemote(turnId, callId, tool, req.args, deadlineMs);
      return;
    }
    const abort = new AbortController();
    const task = cfg.runner
      .run(
        {
          argv: renderArgv(tool.argv ?? [], req.args),
          cwd: cfg.workspace,
          stdin: '',
          timeoutMs: Math.max(1000, deadlineMs - Date.now()),
          maxBytes: 1024 * 1024,
          env: tool.env,
          callId: key,
        },
        AbortSignal.any([this.stopping.signal, abort.signal]),
      )
      .then(async (run) => {
        if (this.stopping.signal.aborted) return; // killed by our stop: the next pup runs it again
        if (abort.signal.aborted) return; // cancelled: its result is the cancellation report
        const ok = run.exitCode === 0 && !run.timedOut && !run.spawnError;
        const limit = d.settings.toolResultChars;
        const output = `${run.stdout.slice(0, limit)}${run.stderr ? `\nstderr:\n${run.stderr.slice(0, limit)}` : ''}`;
        const error = ok
          ? undefined
          : (run.spawnError ?? (run.timedOut ? 'timed out' : `exit code ${run.exitCode ?? run.signal}`));
        await d.steps.receiveTool(turnId, callId, {
          ok,
          output: d.scrub.text(output),
          ...(error ? { error } : {}),
        });
        this.poke();
      })
      .catch((e: unknown) =>
        d.log.warn({ event_type: 'background_tool_failed', tool: tool.name, error: String(e) }),
      )
      .finally(() => this.tasks.delete(key));
    this.tasks.set(key, { turnId, callId, abort, done: task });
  }

  /**
   * A remote A2A agent's call (src/a2a/client.ts), supervised like a background command: its result
   * recorded when its task ends or needs input; aborted by a cancel (the remote task is cancelled) or
   * by its deadline (the turn then gets the timeout report); sent again after a restart with the same
   * message id. Its token is read from the pup's environment here, and nowhere else.
   */
  private callRemote(
    turnId: string,
    callId: string,
    tool: Tool,
    args: Record<string, unknown>,
    deadlineMs: number,
  ) {
    const d = this.deps;
    const key = `${turnId}:${callId}`;
    const abort = new AbortController();
    const remote = tool.a2a;
    const tokenVar = remote?.token?.env;
    const token = tokenVar ? d.env?.[tokenVar] : undefined;
    const record = async (r: { ok: boolean; output: string; error?: string }) => {
      await d.steps.receiveTool(turnId, callId, {
        ok: r.ok,
        output: d.scrub.text(r.output.slice(0, d.settings.toolResultChars)),
        ...(r.error ? { error: d.scrub.text(r.error) } : {}),
      });
      this.poke();
    };
    const signal = AbortSignal.any([
      this.stopping.signal,
      abort.signal,
      AbortSignal.timeout(Math.max(1000, deadlineMs - Date.now())),
    ]);
    const task = (async () => {
      if (!remote) return record({ ok: false, output: '', error: `${tool.name} names no remote agent` });
      if (tokenVar && !token)
        return record({
          ok: false,
          output: '',
          error: `the variable ${tokenVar} (its token) is not set in the pup`,
        });
      try {
        const r = await callRemoteAgent({
          url: remote.url,
          ...(token ? { token } : {}),
          text: typeof args.message === 'string' ? args.message : JSON.stringify(args),
          messageId: `holt-${turnId}-${callId}`,
          ...(typeof args.task_id === 'string' && args.task_id ? { taskId: args.task_id } : {}),
          signal,
        });
        if (!signal.aborted) await record({ ...r, output: r.output });
      } catch (e) {
        // Stopped, cancelled or past its deadline: the next pup, the cancellation report or the timeout report.
        if (signal.aborted) return;
        await record({ ok: false, output: '', error: `the remote agent failed: ${(e as Error).message}` });
      }
    })()
      .catch((e: unknown) =>
        d.log.warn({ event_type: 'remote_agent_failed', tool: tool.name, error: String(e) }),
      )
      .finally(() => this.tasks.delete(key));
    this.tasks.set(key, { turnId, callId, abort, done: task });
  }

  /**
   * Supervision after a restart: the agent's suspended turn's background commands that were still
   * running when the pup died are started again (at least once, like any tool), and NATS requests not
   * yet answered are sent again (a service answers a call once; a duplicate answer is ignored).
   */
  async recover(turnId: string): Promise<number> {
    let n = 0;
    for (const w of await this.deps.steps.toolWaits(turnId)) {
      if (w.status !== 'waiting' || w.deadlineMs <= Date.now()) continue;
      const tool = this.deps.settings.tools.find((t) => t.name === w.toolName);
      const req = AsyncRequest.safeParse(w.request);
      if (!tool || !req.success) continue;
      this.send(turnId, w.toolCallId, tool, req.data, w.deadlineMs);
      n++;
    }
    return n;
  }

  /**
   * Kills the background commands whose calls are no longer waiting (an operator cancelled them:
   * life/tasks.ts gave them a cancellation report), their whole process group. Run after each pass of
   * the loop (a cancel rings the agent's doorbell). Returns how many.
   */
  async reap(): Promise<number> {
    const turns = new Set([...this.tasks.values()].map((t) => t.turnId));
    let n = 0;
    for (const turnId of turns) {
      const waiting = new Set(
        (await this.deps.steps.toolWaits(turnId))
          .filter((w) => w.status === 'waiting')
          .map((w) => w.toolCallId),
      );
      for (const t of this.tasks.values())
        if (t.turnId === turnId && !waiting.has(t.callId) && !t.abort.signal.aborted) {
          t.abort.abort();
          n++;
          this.deps.log.info({
            event_type: 'background_tool_cancelled',
            turn_id: turnId,
            tool_call_id: t.callId,
          });
        }
    }
    return n;
  }

  /** Stops: background commands killed (their calls still wait, so the next pup runs them again). */
  async drain(): Promise<void> {
    this.stopping.abort();
    await Promise.allSettled([...this.tasks.values()].map((t) => t.done));
  }
}
