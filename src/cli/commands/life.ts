import { z } from 'zod';
import { shownTarget } from '../../common/callback.ts';
import { describeLabels } from '../../life/labels.ts';
import { type Reply, ReplyStore } from '../../life/replies.ts';
import { LifeStore } from '../../life/store.ts';
import { withInstancePostgres } from '../instance-pg.ts';
import type { KubeRefHolt } from '../kube.ts';
import { age, out, table } from '../output.ts';
import { atIngress, ingressRequest } from '../send.ts';

/** The instance's life store (its Postgres). */
export const withLife = <T>(name: string | undefined, fn: (l: LifeStore, instance: string) => Promise<T>) =>
  withInstancePostgres(name, 'no living agents', (pool, instance) => fn(new LifeStore(pool), instance));

/** `holt life stop|start ROLE`: a stopped agent's ingress answers 409 and it starts no turn. */
export async function lifeState(
  role: string,
  state: 'running' | 'stopped',
  o: { name?: string },
): Promise<void> {
  await withLife(o.name, async (l, instance) => {
    await l.setState(instance, role, state);
    out(
      state === 'stopped'
        ? `${role} stopped: its ingress refuses (409) and it starts no turn; \`holt life start ${role}\` resumes it`
        : `${role} running`,
    );
  });
}

/** `holt life show ROLE`: the agent's messages with their labels, and the scheduler's decisions. */
export async function lifeShow(role: string, o: { name?: string; json?: boolean }): Promise<void> {
  await withLife(o.name, async (l, instance) => {
    const [messages, audit, deliveries] = await Promise.all([
      l.recentMessages(instance, role),
      l.audit(instance, role, 20),
      new ReplyStore(l.pool).list(instance, role),
    ]);
    if (o.json) {
      const shown = deliveries.map(({ url, ...d }) => ({ ...d, host: shownTarget(url) }));
      return out(JSON.stringify({ messages, audit, deliveries: shown }, null, 2));
    }
    out(`Messages to ${role} (newest last):`);
    if (!messages.length) out('  none');
    for (const m of messages)
      out(
        `  #${m.id} ${age(m.at_ms)} ${m.kind}${m.turnId ? '' : ' (not delivered yet)'} · ${describeLabels(m.labels)}${m.kind === 'message' ? `\n      ${(m.body ?? '').slice(0, 200)}` : ''}`,
      );
    if (deliveries.length) out('Deliveries of outcomes (newest last):');
    for (const d of deliveries) out(`  ${describeDelivery(d)}`);
    out(`Scheduler decisions (newest last):`);
    if (!audit.length) out('  none');
    for (const a of audit) {
      const d = a.detail as { why?: string; turn_id?: string };
      out(
        `  ${age(a.atMs)} ${a.decision}: ${d.why ?? ''}${d.turn_id ? ` (turn ${d.turn_id.slice(0, 8)})` : ''}`,
      );
    }
  });
}

const TaskJson = z.object({
  id: z.string(),
  kind: z.string(),
  what: z.string(),
  state: z.string(),
  deadline: z.string().nullable(),
  created: z.string(),
  work_item: z.string().optional(),
});

/** `holt life tasks ROLE`: the agent's waits and asynchronous calls, through its ingress's API. */
export async function lifeTasks(
  k: KubeRefHolt | undefined,
  role: string,
  o: { name?: string; token?: string; json?: boolean },
): Promise<void> {
  const json = await atIngress(k, role, o, undefined, (url, token) =>
    ingressRequest(url, 'GET', `/v1/agents/${encodeURIComponent(role)}/tasks`, token),
  );
  const tasks = z.object({ tasks: z.array(TaskJson) }).parse(json).tasks;
  if (o.json) return out(JSON.stringify(tasks, null, 2));
  if (!tasks.length) return out(`${role} has no open tasks.`);
  const until = (iso: string | null) => {
    if (!iso) return 'none';
    const ms = Date.parse(iso) - Date.now();
    return ms > 0 ? `in ${age(Date.now() - ms).replace(/ ago$/, '')}` : 'due';
  };
  for (const l of table([
    ['ID', 'KIND', 'STATE', 'DEADLINE', 'AGE', 'WHAT'],
    ...tasks.map((t) => [
      t.id.slice(0, 8),
      t.kind,
      t.state,
      until(t.deadline),
      age(Date.parse(t.created)),
      `${t.what.slice(0, 60)}${t.work_item ? ` (item ${t.work_item.slice(0, 8)})` : ''}`,
    ]),
  ]))
    out(l);
}

/** `holt life cancel ROLE ID`: cancels one task; the agent's next turn gets a cancellation report. */
export async function lifeCancel(
  k: KubeRefHolt | undefined,
  role: string,
  id: string,
  o: { name?: string; token?: string },
): Promise<void> {
  const json = await atIngress(k, role, o, undefined, (url, token) =>
    ingressRequest(
      url,
      'DELETE',
      `/v1/agents/${encodeURIComponent(role)}/tasks/${encodeURIComponent(id)}`,
      token,
    ),
  );
  const t = z.object({ task: TaskJson }).parse(json).task;
  out(
    `cancelled ${t.kind} task ${t.id.slice(0, 8)} (${t.what.slice(0, 60)}): ${
      t.kind === 'command'
        ? 'its process group is killed, and '
        : t.kind === 'a2a'
          ? "the remote agent's task is cancelled, and "
          : ''
    }${role}'s next turn gets a cancellation report`,
  );
}

/** One delivery, as `holt life show` prints it. */
export function describeDelivery(d: Reply, now = Date.now()): string {
  // Only the URL's host: a callback's path may hold a secret (chat webhooks put their token there).
  const where = shownTarget(d.url);
  const head = `${d.id.slice(0, 8)} message #${d.message_id} → ${d.callback} (${where})`;
  const last = d.last_error ? `: ${d.last_error}` : d.last_status ? ` (${d.last_status})` : '';
  if (d.status === 'delivered')
    return `${head}: delivered ${age(d.delivered_ms ?? now, now)} after ${d.attempts} attempt(s)${last}`;
  if (d.status === 'failed') return `${head}: failed after ${d.attempts} attempt(s)${last}`;
  if (!d.attempts) return `${head}: waiting for the outcome`;
  return `${head}: retrying, attempt ${d.attempts} failed${last}; next ${d.next_ms > now ? `in ${Math.ceil((d.next_ms - now) / 1000)}s` : 'now'}`;
}
