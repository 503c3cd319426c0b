import { describeLabels } from '../../life/labels.ts';
import { LifeStore } from '../../life/store.ts';
import { readiness } from '../../work/items.ts';
import { WorkStore } from '../../work/store.ts';
import { withInstancePostgres } from '../instance-pg.ts';
import { age, CliError, EXIT, out, table } from '../output.ts';

/** The instance's work item store (its Postgres); an instance without one has no work items. */
const withStore = <T>(name: string | undefined, fn: (w: WorkStore, instance: string) => Promise<T>) =>
  withInstancePostgres(name, 'no work items', (pool, instance) => fn(new WorkStore(pool), instance));

/** `holt work list [ROLE]`: the agents' work items with their readiness (open ones unless --all). */
export async function workList(
  role: string | undefined,
  opts: { name?: string; all?: boolean; json?: boolean },
) {
  await withStore(opts.name, async (w, instance) => {
    const items = role
      ? await w.list(instance, role, { all: opts.all })
      : await w.listAll(instance, { all: opts.all });
    if (opts.json) return out(JSON.stringify(items, null, 2));
    if (!items.length)
      return out(opts.all ? 'No work items.' : 'No open work items (--all shows finished ones).');
    const now = Date.now();
    const states = new Map(items.map((i) => [i.id, i.state]));
    const rows = items.map((i) => [
      i.id.slice(0, 8),
      i.role,
      i.state,
      i.planStatus,
      readiness(i, now, states).kind,
      `${i.todos.filter((t) => t.done).length}/${i.todos.length}`,
      age(i.updatedAtMs),
      i.objective.length > 60 ? `${i.objective.slice(0, 59)}…` : i.objective,
    ]);
    for (const l of table([
      ['ID', 'AGENT', 'STATE', 'PLAN', 'READINESS', 'TODOS', 'UPDATED', 'OBJECTIVE'],
      ...rows,
    ]))
      out(l);
  });
}

/** `holt work show ID`: one item whole (id or a unique prefix). */
export async function workShow(id: string, opts: { name?: string; json?: boolean }) {
  await withStore(opts.name, async (w, instance) => {
    const i = await w.find(instance, id);
    if (!i)
      throw new CliError(`no single work item matches '${id}': see \`holt work list --all\``, EXIT.notFound);
    if (opts.json) return out(JSON.stringify(i, null, 2));
    const r = readiness(i, Date.now(), new Map());
    out(`Work item ${i.id} (${i.role})`);
    out(`  objective:  ${i.objective}`);
    out(
      `  state:      ${i.state}, plan ${i.planStatus}, ${r.kind}${r.kind === 'waiting' ? ` (${r.wait}: ${r.on})` : ''}`,
    );
    if (i.recheckAtMs) out(`  recheck at: ${new Date(i.recheckAtMs).toISOString()}`);
    for (const b of i.blockedBy)
      out(`  blocked by: ${b.kind === 'item' ? `item ${b.id}` : `${b.wait} wait on ${b.on}`}`);
    if (i.todos.length) out('  todos:');
    for (const t of i.todos) out(`    [${t.done ? 'x' : ' '}] ${t.text}`);
    if (i.report) out(`  report:     ${i.report}`);
    // What reached its agent lately, with the labels it came with (holt life show has them all).
    const messages = await new LifeStore(w.pool).recentMessages(instance, i.role, 5);
    if (messages.length) out(`  latest messages to ${i.role}:`);
    for (const m of messages)
      out(
        `    #${m.id} ${m.kind} · ${describeLabels(m.labels)}${m.body ? `: ${m.body.replace(/\s+/g, ' ').slice(0, 80)}` : ''}`,
      );
  });
}
