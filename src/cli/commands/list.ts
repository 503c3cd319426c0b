import { effectiveStatus, listInstances } from '../../local/instance.ts';
import { out, table, uptime } from '../output.ts';

export function list(opts: { json?: boolean }): void {
  const rows = listInstances().map((s) => {
    const status = effectiveStatus(s);
    const live = status === 'running' || status === 'degraded' || status === 'starting';
    const down = s.components.filter((c) => c.status !== 'running').length;
    return {
      name: s.name,
      // Holt's words: Running / Degraded / Stopped (plus Starting, Stopping, Failed).
      status: capitalise(status === 'running' && down ? 'degraded' : status),
      workspace: s.workspace,
      uptime: live ? uptime(Date.now() - s.startedAt) : '-',
    };
  });
  if (opts.json) {
    out(JSON.stringify(rows, null, 2));
    return;
  }
  if (!rows.length) {
    out('No Holt instances. Start one with `holt up`.');
    return;
  }
  const ws = (w: string) => (w.length > 30 ? `...${w.slice(-27)}` : w);
  for (const l of table([
    ['INSTANCE', 'STATUS', 'WORKSPACE', 'UPTIME'],
    ...rows.map((r) => [r.name, r.status, ws(r.workspace), r.uptime]),
  ]))
    out(l);
}

function capitalise(s: string): string {
  return s.charAt(0).toUpperCase() + s.slice(1);
}
