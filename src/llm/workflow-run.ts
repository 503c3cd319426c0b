import type { ErrorClass } from '../blackboard/error-class.ts';
import { errorMessage } from '../common/errors.ts';
import type { TraceCarrier } from '../telemetry/carrier.ts';
import { GEN_AI, invokeAgent, spanCarrier } from '../telemetry/spans.ts';
import { classOf } from './model/errors.ts';
import type { ChatMessage } from './model/model.ts';
import { readAudit } from './self-audit.ts';
import { renderArgv } from './tools/tools.ts';
import { describeFields, type ResultFields, resultProblem } from './turn/contract.ts';
import { DEFAULT_EXECUTION_PROMPT } from './turn/prompt.ts';
import { fenced } from './turn/scope.ts';
import type { TurnDeps, TurnEnd } from './turn/turn.ts';
import {
  jsonIn,
  nextIndex,
  type Outputs,
  render,
  SELF,
  type Step,
  stepOutput,
  WorkflowState,
} from './workflow.ts';

type StepResult =
  | { ok: true; value: unknown; raw: string; input: string }
  | { ok: false; reason: string; errorClass: ErrorClass };

const fail = (reason: string, errorClass: ErrorClass): StepResult => ({ ok: false, reason, errorClass });

/**
 * Runs an agent's workflow (workflow.ts) as one turn: each step in order, or where a branch sends it;
 * each finished step is stored (its output and the step to run next) under the turn's fence, so a
 * killed pup resumes at the step where it stopped (a step cut short runs again: at-least-once, like a
 * tool). The last step's output is the result.
 */
export class WorkflowRun {
  private readonly deps: TurnDeps;
  constructor(d: TurnDeps) {
    this.deps = d;
  }

  /** The run's `invoke_agent` span once it runs: what its result or Failure artefact carries on. */
  trace: TraceCarrier | undefined;

  /** The steps in the agent's `invoke_agent {role}` span, as a ReAct turn runs in its own. */
  run(): Promise<TurnEnd> {
    const d = this.deps;
    return invokeAgent(d.role, d.claim, { [GEN_AI.conversationId]: d.fence.turnId }, async (span) => {
      this.trace = spanCarrier(span);
      return fenced(() => this.loop());
    });
  }

  private async loop(): Promise<TurnEnd> {
    const d = this.deps;
    const steps = d.settings.workflow ?? [];
    const stored = (await d.steps.steps(d.fence.turnId)).sort((a, b) => a.seq - b.seq);
    let seq = stored.length ? (stored.at(-1)?.seq ?? 0) + 1 : 0;
    const last = stored.at(-1)?.metadata as { workflow?: unknown } | undefined;
    let st = WorkflowState.parse(last?.workflow ?? {});
    // The self-audit is read once, at the first step, and kept with the outputs: a resumed run sees
    // the same figures.
    if (!stored.length && d.settings.selfAudit)
      st = { ...st, outputs: { ...st.outputs, [SELF]: await readAudit(d.store.pool, d.instance, d.role) } };
    if (stored.length)
      d.log.info({ event_type: 'workflow_resumed', next_step: steps[st.next]?.name ?? 'end' });
    const fields = d.claimType === 'review' ? undefined : d.settings.resultFields;
    while (st.next >= 0 && st.next < steps.length) {
      if (d.signal.aborted) return { kind: 'aborted' };
      const step = steps[st.next] as Step;
      const r = await this.runStep(step, st.outputs);
      if (d.signal.aborted) return { kind: 'aborted' };
      if (!r.ok)
        return {
          kind: 'failure',
          reason: `step ${step.name}: ${r.reason}`,
          transcript: '',
          errorClass: r.errorClass,
        };
      const outputs: Outputs = { ...st.outputs, [step.name]: r.value };
      const n = nextIndex(steps, st.next, outputs, d.target);
      if (!n.ok) return { kind: 'failure', reason: n.error, transcript: '', errorClass: 'config' };
      st = { outputs, next: n.index, last: step.branch ? st.last : r.raw };
      const metadata = d.scrub.json({
        workflow: st,
        step: step.name,
        input: r.input.slice(0, 4000),
        output: r.raw.slice(0, 4000),
      });
      await d.steps.recordStep(d.fence, { seq, kind: 'workflow', toolCallIds: [], metadata });
      seq++;
    }
    const problem = resultProblem(st.last ?? '', fields);
    if (problem)
      return {
        kind: 'failure',
        reason: `the workflow's result does not carry the declared fields: ${problem}`,
        transcript: '',
        errorClass: 'model_output',
      };
    return {
      kind: 'result',
      result: {
        type: d.claimType === 'review' ? 'Review' : d.settings.resultType,
        payload: st.last ?? '',
        summary: `workflow of ${steps.length} steps`,
        ...(d.claimType === 'review' ? { structural_type: 'Review' } : {}),
      },
    };
  }

  private runStep(step: Step, outputs: Outputs): Promise<StepResult> {
    if (step.llm) return this.llmStep(step.llm, outputs);
    if (step.code) return this.codeStep(step.name, step.code, outputs);
    if (step.self_audit) {
      const audit = outputs[SELF];
      if (!audit)
        return Promise.resolve(
          fail('self_audit needs the self-audit, which is off for this agent', 'config'),
        );
      const raw = JSON.stringify(audit);
      return Promise.resolve({ ok: true, value: audit, raw, input: 'self_audit' });
    }
    const field = step.branch?.field ?? '';
    return Promise.resolve({ ok: true, value: field, raw: '', input: field });
  }

  /** A model call: the rendered prompt; a reply without the declared fields is sent back, a bounded number of times. */
  private async llmStep(s: NonNullable<Step['llm']>, outputs: Outputs): Promise<StepResult> {
    const d = this.deps;
    const prompt = render(s.prompt, d.target, outputs);
    if (!prompt.ok) return fail(prompt.error, 'config');
    const fields = s.output as ResultFields | undefined;
    const messages: ChatMessage[] = [
      { role: 'system', content: d.systemPrompt?.trim() || DEFAULT_EXECUTION_PROMPT },
      {
        role: 'user',
        content: fields
          ? `${prompt.value}\n\nReply with a JSON object with these fields only:\n${describeFields(fields)}`
          : prompt.value,
      },
    ];
    for (let attempt = 1; ; attempt++) {
      let content: string;
      try {
        const r = await d.agent.call(
          'turn',
          d.fence.turnId,
          { messages, json: fields !== undefined },
          { signal: d.signal },
        );
        content = r.content;
      } catch (e) {
        return fail(errorMessage(e), classOf(e));
      }
      const raw = fields ? jsonIn(content) : content;
      const out = stepOutput(raw, fields);
      if (out.ok) return { ok: true, value: out.value, raw, input: prompt.value };
      if (attempt >= d.settings.maxOutputErrors)
        return fail(`the model's answer was unusable ${attempt} times (last: ${out.error})`, 'model_output');
      messages.push(
        { role: 'assistant', content },
        {
          role: 'user',
          content: `That answer cannot be used: ${out.error}. Reply with the JSON object only.`,
        },
      );
    }
  }

  /** A command (or a declared tool) with its arguments rendered from earlier outputs; its stdout is the output. */
  private async codeStep(name: string, s: NonNullable<Step['code']>, outputs: Outputs): Promise<StepResult> {
    const d = this.deps;
    const tool = s.tool ? d.settings.tools.find((t) => t.name === s.tool) : undefined;
    let argv: string[];
    if (tool) {
      const args: Record<string, unknown> = { ...(tool.defaults ?? {}) };
      for (const [k, t] of Object.entries(s.args ?? {})) {
        const v = render(t, d.target, outputs);
        if (!v.ok) return fail(v.error, 'config');
        args[k] = v.value;
      }
      argv = renderArgv(tool.argv ?? [], { ...args, ...(tool.fixed ?? {}) }); // argv is required unless async (refused here)
    } else {
      argv = [];
      for (const part of s.argv ?? []) {
        const v = render(part, d.target, outputs);
        if (!v.ok) return fail(v.error, 'config');
        argv.push(v.value);
      }
    }
    const run = await d.runner.run(
      {
        argv,
        cwd: d.workspace,
        stdin: '',
        timeoutMs: (tool?.timeoutSeconds ?? s.timeoutSeconds) * 1000,
        maxBytes: 1024 * 1024,
        env: tool?.env,
        callId: `${d.fence.turnId}:${name}`,
      },
      d.signal,
    );
    if (d.signal.aborted) return fail('aborted', 'transient');
    if (run.spawnError) return fail(`failed to start: ${run.spawnError}`, 'tool');
    if (run.timedOut) return fail(`timed out after ${s.timeoutSeconds} s`, 'tool');
    if (run.exitCode !== 0)
      return fail(
        `exit code ${run.exitCode ?? run.signal}: ${d.scrub.text(run.stderr.trim()).slice(0, 300)}`,
        'tool',
      );
    const raw = d.scrub.text(run.stdout.trim());
    const out = stepOutput(raw, s.output as ResultFields | undefined);
    if (!out.ok) return fail(`its output is unusable: ${out.error}`, 'tool');
    return { ok: true, value: out.value, raw, input: JSON.stringify(argv) };
  }
}
