import { describeLabels } from '../../life/labels.ts';
import { LifeStore } from '../../life/store.ts';
import { withInstancePostgres } from '../instance-pg.ts';
import { age, out } from '../output.ts';

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
    const [messages, audit] = await Promise.all([
      l.recentMessages(instance, role),
      l.audit(instance, role, 20),
    ]);
    if (o.json) return out(JSON.stringify({ messages, audit }, null, 2));
    out(`Messages to ${role} (newest last):`);
    if (!messages.length) out('  none');
    for (const m of messages)
      out(
        `  #${m.id} ${age(m.at_ms)} ${m.kind}${m.turnId ? '' : ' (not delivered yet)'} · ${describeLabels(m.labels)}${m.kind === 'message' ? `\n      ${(m.body ?? '').slice(0, 200)}` : ''}`,
      );
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
