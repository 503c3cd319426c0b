import { carrierEnv, carrierOf } from '../../telemetry/carrier.ts';
import type { ToolCall } from '../model/model.ts';
import { renderArgv } from '../tools/tools.ts';
import { afterCommand, afterFileOp, type FileToolName, fileRequest } from '../tools/workspace-tools.ts';
import { checkAction, hashResult, recordAction, recordBlock, signature } from './loop-guard.ts';
import type { Tool, TurnScope } from './scope.ts';
import type { Ctl } from './state.ts';

export async function runTool(
  t: TurnScope,
  call: ToolCall,
  tool: Tool,
  args: Record<string, unknown>,
  sig: string,
): Promise<void> {
  const { deps } = t;
  const ctl = t.state.ctl;
  deps.events.step({ ...t.base(), phase: 'executing', claim_id: deps.claim.id, role: deps.role });
  const run = await deps.runner.run(
    {
      argv: renderArgv(tool.argv ?? [], args), // argv is required unless async: nats (handled above)
      cwd: deps.workspace,
      stdin: '',
      timeoutMs: tool.timeoutSeconds * 1000,
      maxBytes: 1024 * 1024,
      // TRACEPARENT names this call's execute_tool span: a tool that traces continues it.
      env: { ...tool.env, ...carrierEnv(carrierOf()) },
      // The same on a resumed turn's replay of this call.
      callId: `${deps.fence.turnId}:${call.id}`,
    },
    deps.signal,
  );
  if (deps.signal.aborted) return; // not stored: the call runs again on resume
  const status = run.spawnError
    ? `failed to start: ${run.spawnError}`
    : run.timedOut
      ? `timed out after ${tool.timeoutSeconds}s`
      : `exit code ${run.exitCode ?? run.signal}`;
  const limit = deps.settings.toolResultChars;
  const cut = (s: string) => (s.length > limit ? `${s.slice(0, limit)}…[truncated]` : s);
  let content = deps.scrub.text(
    `${status}\nstdout:\n${cut(run.stdout)}${run.stderr ? `\nstderr:\n${cut(run.stderr)}` : ''}`,
  );
  const end = tool.terminate ? t.termination(tool.name, run) : undefined;
  if (end) content += `\n${end.note}`;
  const r = recordAction(ctl.loop, sig, hashResult(content));
  const next: Ctl = {
    ...ctl,
    loop: r.state,
    outputErrors: 0,
    probe: afterCommand(ctl.probe, tool.name, status, run.exitCode === 0 && !run.timedOut && !run.spawnError),
    ...(end?.endedBy ? { endedBy: end.endedBy } : {}),
  };
  const extra: Record<string, unknown> = {
    outcome: 'ok',
    exit_code: run.exitCode,
    duration_ms: Math.round(run.durationMs),
  };
  if (!r.verdict.ok) {
    const block = {
      tool: tool.name,
      rule: r.verdict.rule,
      reason: r.verdict.reason,
      llmStep: ctl.llmSteps,
    };
    next.blocks = [...ctl.blocks, block];
    extra.block = block;
    content += `\n[loop guard] ${r.verdict.reason}; this call is blocked from now on. Use what you learned.`;
    deps.log.warn({
      event_type: 'loop_blocked',
      tool: tool.name,
      rule: r.verdict.rule,
      reason: r.verdict.reason,
    });
  }
  await t.record('tool', [t.toolMsg(call, content)], next, { tool: tool.name, ...extra }, [call.id]);
}

/**
 * A built-in file tool: the operation runs where the tools run (the runner checks the path there),
 * under the loop guard like any tool; what it wrote feeds the state probe.
 */
export async function fileTool(
  t: TurnScope,
  call: ToolCall,
  name: FileToolName,
  args: Record<string, unknown>,
): Promise<void> {
  const { deps } = t;
  const ctl = t.state.ctl;
  const sig = signature(name, args);
  const v = checkAction(ctl.loop, sig);
  if (!v.ok) {
    const block = { tool: name, rule: v.rule, reason: v.reason, llmStep: ctl.llmSteps };
    return t.record(
      'tool',
      [
        t.toolMsg(
          call,
          `BLOCKED by the loop guard: ${v.reason}. This call was not run. Try a different approach.`,
        ),
      ],
      { ...ctl, loop: recordBlock(ctl.loop, sig), blocks: [...ctl.blocks, block] },
      { tool: name, outcome: 'blocked', block },
      [call.id],
    );
  }
  const r = await deps.runner.file(fileRequest(name, args, deps.workspace, deps.settings.fileToolsAllowGit));
  const limit = deps.settings.toolResultChars;
  const text = r.ok ? r.output : `error: ${r.error}`;
  const content = deps.scrub.text(text.length > limit ? `${text.slice(0, limit)}…[truncated]` : text);
  const next: Ctl = {
    ...ctl,
    loop: recordAction(ctl.loop, sig, hashResult(content)).state,
    outputErrors: 0,
    probe: afterFileOp(ctl.probe, name, String(args.path ?? '.'), r),
  };
  await t.record(
    'tool',
    [t.toolMsg(call, content)],
    next,
    { tool: name, outcome: r.ok ? 'ok' : 'file_error' },
    [call.id],
  );
}
