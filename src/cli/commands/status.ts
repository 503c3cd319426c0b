import { Blackboard } from '../../blackboard/client.ts';
import { effectiveStatus } from '../../local/instance.ts';
import { out, paint, table, uptime } from '../output.ts';
import { resolveInstance } from '../resolve.ts';

export async function status(opts: { name?: string; json?: boolean }): Promise<void> {
  const s = resolveInstance(opts.name, { mustRun: false });
  const st = effectiveStatus(s);
  const claims: Record<string, number> = {};
  if (st === 'running' || st === 'degraded') {
    const bb = Blackboard.connect(s.redisUrl!, s.name, { maxRetriesPerRequest: 1 });
    try {
      for (const c of await bb.getClaims(await bb.listClaimIds()))
        if (c) claims[c.claim.status] = (claims[c.claim.status] ?? 0) + 1;
    } finally {
      await bb.close();
    }
  }
  if (opts.json) return out(JSON.stringify({ ...s, status: st, claims }, null, 2));
  const colour = st === 'running' ? 'green' : st === 'failed' ? 'red' : 'yellow';
  out(
    `Instance ${s.name}: ${paint(colour, st)}${st === 'running' ? ` (up ${uptime(Date.now() - s.startedAt)})` : ''}`,
  );
  out(`  workspace: ${s.workspace}`);
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
  const order = [
    'pending_review',
    'pending_parallel',
    'pending_exclusive',
    'pending_assignment',
    'complete',
    'terminated',
  ];
  out(`Claims: ${order.map((k) => `${k}=${claims[k] ?? 0}`).join('  ')}`);
}
