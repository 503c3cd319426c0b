import { Redis } from 'ioredis';
import { Blackboard } from '../../blackboard/client.ts';
import { Artefact, Claim, WorkflowEvent } from '../../blackboard/types.ts';
import { formatJsonl, formatLine, globMatch, type WatchItem } from '../format.ts';
import { CliError, EXIT, err, out, paint } from '../output.ts';
import { parseTime, positiveInt, resolveTarget } from '../resolve.ts';
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
  const s = resolveTarget(opts.name);
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

  const bb = Blackboard.connect(s.redisUrl, s.name, s.redisOptions);
  const sub = new Redis(s.redisUrl, { ...s.redisOptions, maxRetriesPerRequest: null });
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
  // Live items are held back while history replays, then released without the ones replayed.
  let backlog: WatchItem[] | undefined = [];
  const replayed = new Set<string>();
  const live = (item: WatchItem) => {
    if (backlog) return void backlog.push(item);
    if (item.kind === 'artefact' && replayed.has(item.artefact.id)) return;
    if (item.kind === 'claim' && replayed.has(item.claim.id)) return;
    emit(item);
    if (item.kind !== 'artefact' || !opts.exitOnCompletion) return;
    const a = item.artefact;
    if (a.structural_type === 'Terminal') finish(EXIT.ok);
    if (a.structural_type === 'Failure' && a.produced_by_role === 'orchestrator') finish(EXIT.error);
  };
  sub.on('message', (channel: string, raw: string) => {
    const item = parseLive(k, channel, raw);
    if (item) live(item);
  });
  await sub.subscribe(k.artefactEvents, k.claimEvents, k.workflowEvents, k.workflowEventsExt);

  if (since !== undefined || until !== undefined || opts.type || opts.agent) {
    for (const item of await replayHistory(bb, { since, until })) {
      if (item.kind === 'artefact') replayed.add(item.artefact.id);
      if (item.kind === 'claim') replayed.add(item.claim.id);
      emit(item);
    }
    if (until !== undefined && until < Date.now()) finish(EXIT.ok);
  }
  const held = backlog;
  backlog = undefined;
  for (const item of held) live(item);
  if (opts.onReady) await opts.onReady();
  const timeoutS = opts.timeout ? positiveInt('--timeout', opts.timeout) : 0;
  const timer = timeoutS > 0 ? setTimeout(() => finish(EXIT.timeout), timeoutS * 1000) : undefined;
  process.once('SIGINT', () => finish(EXIT.ok));
  const code = await done;
  if (timer) clearTimeout(timer);
  sub.disconnect();
  await bb.close();
  if (code === EXIT.timeout) throw new CliError(`no completion within ${timeoutS}s`, EXIT.timeout);
  if (code !== EXIT.ok) throw new CliError('the workflow failed (see the Failure artefact above)', code);
}

/** One message of the three live channels as a watch item; anything malformed is dropped. */
function parseLive(k: Blackboard['k']['channels'], channel: string, raw: string): WatchItem | undefined {
  let value: unknown;
  try {
    value = JSON.parse(raw);
  } catch {
    return undefined;
  }
  const now = Date.now();
  if (channel === k.artefactEvents) {
    const a = Artefact.safeParse(value);
    return a.success ? { kind: 'artefact', at: a.data.created_at_ms || now, artefact: a.data } : undefined;
  }
  if (channel === k.claimEvents) {
    const c = Claim.safeParse(value);
    return c.success ? { kind: 'claim', at: now, claim: c.data } : undefined;
  }
  const e = WorkflowEvent.safeParse(value);
  return e.success ? { kind: 'workflow', at: now, event: e.data } : undefined;
}
