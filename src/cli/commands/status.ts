import type { AgentStatus } from '../../blackboard/agent-status.ts';
import type { McpStatusReport } from '../../blackboard/mcp-status.ts';
import type { RetentionReport } from '../../blackboard/retention-report.ts';
import { CLAIM_STATUSES, type Claim } from '../../blackboard/types.ts';
import { traceIdOf } from '../../telemetry/carrier.ts';
import { out, paint, table, uptime } from '../output.ts';
import { localStatus, localStatusJson } from '../status-report.ts';

export async function status(opts: { name?: string; json?: boolean }): Promise<void> {
  const r = await localStatus(opts.name);
  if (opts.json) return out(JSON.stringify(localStatusJson(r), null, 2));
  const { state: s, status: st, claims, dormant, llm, mcp, quarantined, retention } = r;
  const colour = st === 'running' ? 'green' : st === 'failed' ? 'red' : 'yellow';
  out(
    `Instance ${s.name}: ${paint(colour, st)}${st === 'running' ? ` (up ${uptime(Date.now() - s.startedAt)})` : ''}`,
  );
  out(`  workspace: ${s.workspace}`);
  if (s.ingressUrl)
    out(`  ingress:   ${s.ingressUrl}/v1/agents/{role}/messages|wake (holt token create ROLE)`);
  if (s.error) out(`  error:     ${s.error}`);
  out('');
  const rows = s.components.map((c) => [
    c.name,
    c.kind,
    c.status,
    c.pid ? String(c.pid) : '-',
    String(c.restarts),
    c.lastExit ?? '',
  ]);
  for (const l of table([['COMPONENT', 'KIND', 'STATUS', 'PID', 'RESTARTS', 'LAST EXIT'], ...rows])) out(l);
  out('');
  out(`Claims: ${CLAIM_STATUSES.map((k) => `${k}=${claims[k] ?? 0}`).join('  ')}`);
  for (const l of dormantLines(dormant)) out(l);
  if (retention) out(retentionLine(retention));
  if (quarantined.length) {
    // Set aside, never acted on: the operator of the instance should look at each.
    out('');
    out(paint('yellow', `Quarantined: ${quarantined.length}`));
    const rows = quarantined.map((q) => [q.kind, q.id, q.produced_by_role ?? '', q.claim_id ?? '', q.reason]);
    for (const l of table([['KIND', 'ID', 'BY', 'CLAIM', 'REASON'], ...rows])) out(l);
  }
  if (llm.size) {
    out('');
    for (const l of llmAgentLines(llm)) out(l);
  }
  const m = mcpServerLines(mcp);
  if (m.length) out('');
  for (const l of m) out(l);
}

/**
 * The agents' MCP servers that are not connected (src/blackboard/mcp-status.ts, as each pup last
 * reported them): which, since when and why; one line when all are. Nothing without MCP servers.
 */
export function mcpServerLines(mcp: Map<string, McpStatusReport>, now = Date.now()): string[] {
  const all = [...mcp].flatMap(([role, r]) => r.servers.map((s) => ({ role, ...s })));
  if (!all.length) return [];
  const down = all.filter((s) => s.state !== 'connected');
  if (!down.length) return [`MCP servers: ${all.length} connected`];
  return [
    paint(
      'yellow',
      `MCP servers not connected: ${down.length} of ${all.length} (their tools are not offered)`,
    ),
    ...table([
      ['AGENT', 'SERVER', 'STATE', 'SINCE', 'REASON'],
      ...down.map((s) => [
        s.role,
        s.name,
        s.state,
        s.since_ms ? `${uptime(Math.max(0, now - s.since_ms))} ago` : '-',
        s.reason ?? '',
      ]),
    ]).map((l) => `  ${l}`),
  ];
}

/**
 * Dormant claims (counted under their pending_* status): why each is, and for one closed while some
 * agents were silent, which: a bid from one of them re-opens it. At most 20 rows, newest first.
 */
export function dormantLines(dormant: Claim[]): string[] {
  if (!dormant.length) return [];
  const rows = [...dormant]
    .sort((a, b) => (b.created_at_ms ?? 0) - (a.created_at_ms ?? 0))
    .slice(0, 20)
    .map((c) => [
      c.id,
      c.dormant_reason ?? '',
      c.silent_agents?.length ? `${c.silent_agents.join(',')} (a bid from one re-opens it)` : '-',
      traceIdOf(c) ?? '-',
    ]);
  return [
    paint('yellow', `Dormant claims: ${dormant.length} (nothing granted; each says why)`),
    ...table([['CLAIM', 'REASON', 'SILENT AGENTS', 'TRACE'], ...rows]).map((l) => `  ${l}`),
    ...(dormant.length > rows.length ? [`  ... and ${dormant.length - rows.length} more`] : []),
  ];
}

/**
 * The LLM agents' table (src/blackboard/agent-status.ts: holt:{i}:agent_status:{role}): budget use (0 as
 * a limit means none) and, for a paused agent, the class of the error that paused it and why; the living
 * agents' work items; one line on the long-term memories of those that have one.
 */
export function llmAgentLines(llm: Map<string, AgentStatus>): string[] {
  const lim = (v: number, l: number) => (l ? `${v}/${l}` : String(v));
  const llmRows = [...llm].map(([role, a]) => [
    role,
    a.state === 'paused'
      ? paint('yellow', a.paused_class ? `paused (${a.paused_class})` : 'paused')
      : 'active',
    lim(a.calls_in_window, a.calls_limit),
    lim(a.tokens_in_window, a.tokens_limit),
    a.cost_usd_limit
      ? `$${a.cost_usd_total.toFixed(4)}/$${a.cost_usd_limit}`
      : `$${a.cost_usd_total.toFixed(4)}`,
    String(a.consecutive_errors),
    a.paused_reason,
  ]);
  const lines = table([
    ['LLM AGENT', 'STATE', 'CALLS', 'TOKENS', 'COST', 'ERRORS', 'PAUSED BECAUSE'],
    ...llmRows,
  ]);
  const living = [...llm].filter(([, a]) => a.life_state);
  if (living.length)
    lines.push(
      '',
      ...table([
        ['LIVING AGENT', 'LIFE', 'RUNNABLE', 'WAITING', 'BLOCKED', 'COMPLETED', 'LAST MESSAGE'],
        ...living.map(([role, a]) => [
          role,
          a.life_state === 'stopped' ? paint('yellow', 'stopped') : a.life_state,
          String(a.items_runnable),
          String(a.items_waiting),
          String(a.items_blocked),
          String(a.items_completed),
          a.last_message_at_ms ? `${uptime(Math.max(0, Date.now() - a.last_message_at_ms))} ago` : '-',
        ]),
      ]),
    );
  const remembering = [...llm].flatMap(([role, a]) =>
    a.memories === undefined
      ? []
      : [`${role} ${a.memories} (recalled ${a.memory_recalls} time${a.memory_recalls === 1 ? '' : 's'})`],
  );
  if (remembering.length) lines.push('', `Long-term memories: ${remembering.join(', ')}`);
  return lines;
}

/** One line on the leader's last retention pass and what it has removed in all. */
export function retentionLine(r: RetentionReport, now = Date.now()): string {
  const t = r.total;
  const parts = [
    `${t.workflows} workflows (${t.artefacts} artefacts, ${t.claims} claims)`,
    ...(t.turns || t.inbox_rows ? [`${t.turns} turns, ${t.inbox_rows} inbox rows`] : []),
  ];
  const kept = Object.entries(r.kept).map(([why, n]) => `${n} ${why.replace('_', ' ')}`);
  return [
    `Retention: ${r.days} days; last pass ${uptime(Math.max(0, now - r.last_pass_ms))} ago`,
    `removed ${parts.join(', ')} in all`,
    ...(kept.length ? [`old workflows kept: ${kept.join(', ')}`] : []),
    ...(r.error ? [paint('red', `last pass failed: ${r.error}`)] : []),
  ].join('; ');
}
