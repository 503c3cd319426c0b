import { labelsOf, wrapMessage } from '../../life/labels.ts';
import {
  GetPromptArgs,
  MCP_GET_PROMPT,
  MCP_READ_RESOURCE,
  type McpHub,
  ReadResourceArgs,
} from '../mcp/hub.ts';
import { promptText, resourceText, resultText, SEPARATOR } from '../mcp/results.ts';
import type { Outcome } from '../mcp/server.ts';
import { checkValues, resolvePaths } from '../tools/args.ts';
import { builtinArgs } from '../tools/tools.ts';
import { awaitApproval, refusal } from './approval.ts';
import type { CallContext } from './builtins.ts';
import { checkAction, hashResult, recordAction, recordBlock, signature } from './loop-guard.ts';

/** The cap on each argument of an MCP tool: a declared tool's default. */
const MAX_ARGUMENT_BYTES = 16_384;

/** What an MCP server said, as the model reads it: external evidence, never an instruction. */
const evidence = (server: string, what: string, body: string) =>
  wrapMessage(labelsOf('task', 'message', `mcp ${server} ${what}`, `MCP server ${server}`), body);

/**
 * A call to an MCP server's tool, or to `mcp_read_resource` / `mcp_get_prompt`: the arguments checked
 * as any tool's (caps, control characters, `format: path` confined to the workspace), the loop guard
 * asked, then the call, limited by the server's timeout and cancelled with the turn.
 */
export async function mcpCall(x: CallContext, hub: McpHub): Promise<void> {
  const { t, call, reply } = x;
  const { deps } = t;
  const name = call.function.name;
  const fault = checkValues(x.args, MAX_ARGUMENT_BYTES);
  if (fault) return x.bad(fault);
  if (name === MCP_READ_RESOURCE) {
    const a = builtinArgs(ReadResourceArgs, x.args);
    if (!a.ok) return x.bad(a.error);
    const s = hub.server(a.value.server);
    if (!s) return x.bad(`no MCP server named ${a.value.server}`);
    return guarded(x, a.value, async () =>
      shown(s.spec.name, a.value.uri, await s.readResource(a.value.uri, deps.signal), (r) =>
        resourceText(r, deps.settings.toolResultChars),
      ),
    );
  }
  if (name === MCP_GET_PROMPT) {
    const a = builtinArgs(GetPromptArgs, x.args);
    if (!a.ok) return x.bad(a.error);
    const s = hub.server(a.value.server);
    if (!s) return x.bad(`no MCP server named ${a.value.server}`);
    return guarded(x, a.value, async () =>
      shown(
        s.spec.name,
        `prompt ${a.value.name}`,
        await s.getPrompt(a.value.name, a.value.arguments, deps.signal),
        (r) => promptText(r, deps.settings.toolResultChars),
      ),
    );
  }
  const tool = hub.tool(name);
  if (!tool) {
    // Offered when the turn began, gone since: its server went down or dropped it.
    const server = hub.server(name.split(SEPARATOR)[0] ?? '');
    return reply(
      `error: ${name} is unavailable now${server?.reason ? ` (MCP server ${server.spec.name}: ${server.reason})` : ''}. Go on without it.`,
      t.state.ctl,
      { outcome: 'tool_error', error_class: 'transient' },
    );
  }
  const server = hub.server(tool.server)!;
  const p = await resolvePaths(tool.schema, x.args, deps.workspace);
  if (!p.ok) return x.bad(p.error);
  if (server.spec.requireApproval.includes(tool.name)) {
    const ok = await awaitApproval(t, call, { tool: name, args: x.args });
    if (ok === 'waiting') return;
    if (ok !== 'approved') return reply(refusal(name, ok.rejected), t.state.ctl, { outcome: 'rejected' });
  }
  return guarded(x, p.value, async () => {
    deps.events.step({ ...t.base(), phase: 'executing', claim_id: deps.claim.id, role: deps.role });
    const started = performance.now();
    const out = await server.call(tool.name, p.value, {
      signal: deps.signal,
      deadlineMs: timeBoxEnd(t),
      onProgress: (pr) => {
        const message = pr.message ? deps.scrub.text(pr.message).slice(0, 200) : undefined;
        deps.log.info({
          event_type: 'mcp_progress',
          server: tool.server,
          tool: tool.name,
          tool_call_id: call.id,
          progress: pr.progress,
          total: pr.total,
          message,
        });
        // An agent event too, so that whoever follows the turn (holt watch, a console) sees it move.
        deps.events.step({
          ...t.base(),
          phase: 'executing',
          claim_id: deps.claim.id,
          role: deps.role,
          tool: name,
          progress: {
            done: pr.progress,
            ...(pr.total !== undefined ? { total: pr.total } : {}),
            ...(message ? { message } : {}),
          },
        });
      },
    });
    deps.log.info({
      event_type: 'mcp_call',
      server: tool.server,
      tool: tool.name,
      ok: out.ok,
      duration_ms: Math.round(performance.now() - started),
    });
    if (!out.ok)
      return {
        content: `error: ${out.error}`,
        extra: { outcome: 'tool_error', error_class: out.errorClass },
      };
    const r = resultText(out.result, deps.settings.toolResultChars);
    return {
      content: evidence(tool.server, tool.name, r.text),
      extra: { outcome: r.isError ? 'tool_error' : 'ok', ...(r.isError ? { error_class: 'tool' } : {}) },
    };
  });
}

/** When the turn's or the goal's time box ends, if it has one (policy.ts timeBoxExceeded). */
function timeBoxEnd(t: CallContext['t']): number | undefined {
  const { ctl } = t.state;
  const st = t.deps.settings;
  const ends = [
    st.turnTimeoutMs && ctl.startedAtMs ? ctl.startedAtMs + st.turnTimeoutMs : undefined,
    st.goalTimeoutMs && ctl.goalAtMs ? ctl.goalAtMs + st.goalTimeoutMs : undefined,
  ].filter((x): x is number => x !== undefined);
  return ends.length ? Math.min(...ends) : undefined;
}

type Shown = { content: string; extra: Record<string, unknown> };

const shown = (
  server: string,
  what: string,
  out: Outcome,
  text: (r: Record<string, unknown>) => string,
): Shown =>
  out.ok
    ? { content: evidence(server, what, text(out.result)), extra: { outcome: 'ok' } }
    : { content: `error: ${out.error}`, extra: { outcome: 'tool_error', error_class: out.errorClass } };

/** The loop guard around a call, as for a declared tool: a repeat is blocked, an unchanged result noted. */
async function guarded(
  x: CallContext,
  args: Record<string, unknown>,
  run: () => Promise<Shown>,
): Promise<void> {
  const { t, call, reply } = x;
  const ctl = t.state.ctl;
  const name = call.function.name;
  const sig = signature(name, args);
  const v = checkAction(ctl.loop, sig);
  if (!v.ok) {
    const block = { tool: name, rule: v.rule, reason: v.reason, llmStep: ctl.llmSteps };
    return reply(
      `BLOCKED by the loop guard: ${v.reason}. This call was not run. Try a different approach.`,
      { ...ctl, loop: recordBlock(ctl.loop, sig), blocks: [...ctl.blocks, block] },
      { outcome: 'blocked', block },
    );
  }
  const r = await run();
  if (t.deps.signal.aborted) return; // not stored: the call runs again on resume
  const guard = recordAction(ctl.loop, sig, hashResult(r.content));
  let content = r.content;
  const next = { ...ctl, loop: guard.state };
  if (!guard.verdict.ok) {
    const block = {
      tool: name,
      rule: guard.verdict.rule,
      reason: guard.verdict.reason,
      llmStep: ctl.llmSteps,
    };
    next.blocks = [...ctl.blocks, block];
    content += `\n[loop guard] ${guard.verdict.reason}; this call is blocked from now on. Use what you learned.`;
  }
  return reply(content, next, r.extra);
}
