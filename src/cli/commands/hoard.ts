import { Blackboard } from '../../blackboard/client.ts';
import type { Artefact } from '../../blackboard/types.ts';
import { traceIdOf } from '../../telemetry/carrier.ts';
import { findArtefact, listArtefacts } from '../board.ts';
import { abbreviateType, payloadPreview } from '../format.ts';
import { age, CliError, EXIT, err, out, table } from '../output.ts';
import { parseTime, resolveTarget } from '../resolve.ts';
import { remoteTarget } from '../target.ts';

export interface HoardOptions {
  name?: string;
  output: string;
  since?: string;
  until?: string;
  type?: string;
  agent?: string;
  /** Living agents' messages (their provenance labels) instead of artefacts; local mode. */
  messages?: boolean;
}

export async function hoard(id: string | undefined, opts: HoardOptions): Promise<void> {
  if (!['default', 'jsonl'].includes(opts.output))
    throw new CliError(`-o: unknown format "${opts.output}"`, EXIT.usage);
  if (opts.messages) return hoardMessages(opts);
  const s = resolveTarget(opts.name);
  const bb = Blackboard.connect(s.redisUrl, s.name, s.redisOptions);
  try {
    if (id) {
      out(JSON.stringify(await findArtefact(bb, id), null, 2));
      return;
    }
    const list = await listArtefacts(bb, {
      sinceMs: opts.since ? parseTime('--since', opts.since) : undefined,
      untilMs: opts.until ? parseTime('--until', opts.until) : undefined,
      type: opts.type,
      agent: opts.agent,
    });
    if (opts.output === 'jsonl') {
      for (const a of list) out(JSON.stringify(a));
      return;
    }
    if (!list.length) return out(`No artefacts found for instance '${s.name}'`);
    out(`Artefacts for instance '${s.name}':`);
    const rows = list.map((a) => [
      a.id.slice(0, 8),
      a.version > 1 ? `v${a.version}` : '-',
      abbreviateType(a.type),
      a.produced_by_role,
      age(a.created_at_ms),
      payloadPreview(a.payload),
    ]);
    for (const l of table([['ID', 'VER', 'TYPE', 'BY', 'AGE', 'PAYLOAD'], ...rows])) out(l);
    out(`${list.length} artefacts found`);
    for (const l of traceLines(list)) out(l);
  } catch (e) {
    if (e instanceof CliError) throw e;
    err(`cannot read the blackboard of '${s.name}': ${(e as Error).message}`);
    throw new CliError('is the instance running? try `holt status`');
  } finally {
    await bb.close();
  }
}

/**
 * The traces the listed artefacts belong to (a workflow keeps one from its goal to its Terminal), each
 * with the first artefact seen in it: the id to look the workflow up by in Jaeger or Tempo.
 */
export function traceLines(list: Artefact[]): string[] {
  const traces = new Map<string, { first: Artefact; count: number }>();
  for (const a of list) {
    const id = traceIdOf(a);
    if (!id) continue;
    const t = traces.get(id);
    if (t) t.count++;
    else traces.set(id, { first: a, count: 1 });
  }
  if (!traces.size) return [];
  const rows = [...traces].map(([id, t]) => [
    id,
    `${t.count} artefact${t.count === 1 ? '' : 's'} from ${t.first.id.slice(0, 8)} (${abbreviateType(t.first.type)})`,
  ]);
  return ['Traces (look one up by its id in Jaeger or Tempo):', ...table(rows).map((l) => `  ${l}`)];
}

/** `holt hoard --messages [--agent ROLE]`: what came in to living agents, with the labels it came with. */
async function hoardMessages(opts: HoardOptions): Promise<void> {
  if (remoteTarget())
    throw new CliError(
      "--messages: local mode only; on a cluster, `holt --kube NS/NAME life show ROLE` shows an agent's messages with their labels",
      EXIT.usage,
    );
  const { withLife } = await import('./life.ts');
  await withLife(opts.name, async (l, instance) => {
    const roles = opts.agent ? [opts.agent] : await l.roles(instance);
    const rows = (await Promise.all(roles.map((r) => l.recentMessages(instance, r, 200)))).flat();
    rows.sort((a, b) => a.at_ms - b.at_ms);
    if (opts.output === 'jsonl') {
      for (const m of rows) out(JSON.stringify(m));
      return;
    }
    if (!rows.length) return out('No messages.');
    for (const t of table([
      ['ID', 'AGENT', 'KIND', 'AGE', 'ORIGIN', 'ADMISSION', 'AUTHORITY', 'DELIVERED', 'BODY'],
      ...rows.map((m) => [
        m.id,
        m.role,
        m.kind,
        age(m.at_ms),
        m.labels.origin,
        m.labels.admission,
        m.labels.authority,
        m.turnId ? 'yes' : 'no',
        (m.body ?? '').replace(/\s+/g, ' ').slice(0, 50),
      ]),
    ]))
      out(t);
  });
}
