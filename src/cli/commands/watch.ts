import { Redis } from 'ioredis';
import { Blackboard } from '../../blackboard/client.ts';
import { Artefact, Claim, WorkflowEvent } from '../../blackboard/types.ts';
import { formatJsonl, formatLine, globMatch, type WatchItem } from '../format.ts';
import { CliError, EXIT, err, out, paint } from '../output.ts';
import { parseTime, resolveInstance } from '../resolve.ts';
import { replayHistory } from './replay.ts';

export interface WatchOptions {
  name?: string;
  output: string;
  since?: string;
  until?: string;
  type?: string;
  agent?: string;
  exitOnCompletion?: boolean;
  timeout?: string;
  /** Called once the live subscriptions are in place (forage --watch creates its goal here). */
  onReady?: () => Promise<void>;
}

export async function watch(opts: WatchOptions): Promise<void> {
  if (!['default', 'jsonl', 'json'].includes(opts.output))
    throw new CliError(`-o: unknown format "${opts.output}" (use default or jsonl)`, EXIT.usage);
  const s = resolveInstance(opts.name);
  const since = opts.since ? parseTime('--since', opts.since) : undefined;
  const until = opts.until ? parseTime('--until', opts.until) : undefined;
  if (since !== undefined && until !== undefined && since >= until)
    throw new CliError('--since must be before --until', EXIT.usage);
  const jsonl = opts.output !== 'default';
  const artefactPasses = (a: Artefact) =>
    (!opts.type || globMatch(opts.type, a.type)) && (!opts.agent || a.produced_by_role === opts.agent);
  const emit = (item: WatchItem) => {
    if (item.kind === 'artefact' && !artefactPasses(item.artefact)) return;
    if (jsonl) for (const l of formatJsonl(item)) out(l);
    else {
      const l = formatLine(item);
      if (l)
        out(item.kind === 'artefact' && item.artefact.structural_type === 'Failure' ? paint('red', l) : l);
    }
  };

  const bb = Blackboard.connect(s.redisUrl!, s.name);
  const sub = new Redis(s.redisUrl!, { maxRetriesPerRequest: null });
  const k = bb.k.channels;
  let lost = false;
  sub.on('error', () => {
    if (!lost && !jsonl)
      err(paint('yellow', '⚠️  Connection to blackboard lost. Reconnecting...', process.stderr));
    lost = true;
  });
  sub.on('ready', () => {
    if (lost && !jsonl) err(paint('green', '✓ Reconnected to blackboard', process.stderr));
    lost = false;
  });

  let finish: (code: number) => void = () => undefined;
  const done = new Promise<number>((resolve) => (finish = resolve));
  sub.on('message', (channel: string, raw: string) => {
    let value: unknown;
    try {
      value = JSON.parse(raw);
    } catch {
      return;
    }
    const now = Date.now();
    if (channel === k.artefactEvents) {
      const a = Artefact.safeParse(value);
      if (!a.success) return;
      emit({ kind: 'artefact', at: a.data.created_at_ms || now, artefact: a.data });
      if (opts.exitOnCompletion && a.data.structural_type === 'Terminal') finish(EXIT.ok);
      if (
        opts.exitOnCompletion &&
        a.data.structural_type === 'Failure' &&
        a.data.produced_by_role === 'orchestrator'
      )
        finish(EXIT.error);
    } else if (channel === k.claimEvents) {
      const c = Claim.safeParse(value);
      if (c.success) emit({ kind: 'claim', at: now, claim: c.data });
    } else if (channel === k.workflowEvents) {
      const e = WorkflowEvent.safeParse(value);
      if (e.success) emit({ kind: 'workflow', at: now, event: e.data });
    }
  });
  await sub.subscribe(k.artefactEvents, k.claimEvents, k.workflowEvents);

  if (since !== undefined || until !== undefined || opts.type || opts.agent) {
    for (const item of await replayHistory(bb, { since, until })) emit(item);
    if (until !== undefined && until < Date.now()) finish(EXIT.ok);
  }
  if (opts.onReady) await opts.onReady();
  const timeoutS = opts.timeout ? Number(opts.timeout) : 0;
  const timer = timeoutS > 0 ? setTimeout(() => finish(EXIT.timeout), timeoutS * 1000) : undefined;
  process.once('SIGINT', () => finish(EXIT.ok));
  const code = await done;
  if (timer) clearTimeout(timer);
  sub.disconnect();
  await bb.close();
  if (code === EXIT.timeout) throw new CliError(`no completion within ${timeoutS}s`, EXIT.timeout);
  if (code !== EXIT.ok) throw new CliError('the workflow failed (see the Failure artefact above)', code);
}
