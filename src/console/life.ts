import type pg from 'pg';
import { shownTarget } from '../common/callback.ts';
import { type Reply, ReplyStore } from '../life/replies.ts';
import { LifeStore } from '../life/store.ts';
import { LifeTasks, type Task } from '../life/tasks.ts';
import { MemoryStore } from '../memory/store.ts';
import { WorkStore } from '../work/store.ts';

/**
 * The living agents page (docs/console.md): each agent that lives, from the Holt's Postgres: its state,
 * its tasks (waits and asynchronous calls, cancelled from the page), the messages that came in with
 * their labels, its work items with their reports, its newest memories, the scheduler's decisions
 * and the deliveries of outcomes. Read again every few seconds (these change in Postgres, not on the board) and sent when
 * they changed.
 */

export interface LivingAgent {
  role: string;
  state: 'running' | 'stopped';
  lastMessageMs: number;
  tasks: Task[];
  messages: {
    id: string;
    kind: string;
    body: string | null;
    labels: Record<string, unknown>;
    atMs: number;
  }[];
  items: { id: string; objective: string; state: string; report: string | null; updatedAtMs: number }[];
  decisions: { decision: string; why: string; atMs: number }[];
  /** Its newest memories (its own and the Holt's), as recall would show them. */
  memories: {
    id: string;
    kind: string;
    scope: string;
    body: string;
    authority: string;
    uses: number;
    atMs: number;
  }[];
  deliveries: {
    id: string;
    callback: string;
    host: string;
    status: Reply['status'];
    attempts: number;
    lastError: string | null;
  }[];
}

/** The roles that live: those with a life row (made by their first message or turn). */
async function livingRoles(pool: pg.Pool, instance: string): Promise<string[]> {
  const r = await pool.query<{ role: string }>(
    'SELECT role FROM holt.agent_life WHERE instance = $1 ORDER BY role',
    [instance],
  );
  return r.rows.map((x) => x.role);
}

export async function readLiving(pool: pg.Pool, instance: string): Promise<LivingAgent[]> {
  const life = new LifeStore(pool);
  const tasks = new LifeTasks(pool);
  const work = new WorkStore(pool);
  const replies = new ReplyStore(pool);
  const memory = new MemoryStore(pool);
  const out: LivingAgent[] = [];
  for (const role of await livingRoles(pool, instance)) {
    const [row, open, messages, items, audit, sent, memories] = await Promise.all([
      life.lifeRow(instance, role),
      tasks.list(instance, role),
      life.recentMessages(instance, role, 20),
      work.list(instance, role, { all: true, limit: 20 }),
      life.audit(instance, role, 20),
      replies.list(instance, role, 20),
      memory.list({ instance, role, limit: 10 }),
    ]);
    out.push({
      role,
      state: row.state,
      lastMessageMs: row.lastMessageMs,
      tasks: open,
      messages: messages.map((m) => ({
        id: m.id,
        kind: m.kind,
        body: m.body,
        labels: m.labels,
        atMs: m.at_ms,
      })),
      items: items.map((i) => ({
        id: i.id,
        objective: i.objective,
        state: i.state,
        report: i.report,
        updatedAtMs: i.updatedAtMs,
      })),
      decisions: audit.map((a) => ({
        decision: a.decision,
        why: String((a.detail as { why?: unknown }).why ?? ''),
        atMs: a.atMs,
      })),
      memories: memories.map((m) => ({
        id: m.id,
        kind: m.kind,
        scope: m.scope,
        body: m.body,
        authority: m.authority,
        uses: m.uses,
        atMs: m.createdAtMs,
      })),
      // The URL's host only (its path may hold a secret), or the tool service's nats:<tool>.
      deliveries: sent.map((d) => ({
        id: d.id,
        callback: d.callback,
        host: shownTarget(d.url),
        status: d.status,
        attempts: d.attempts,
        lastError: d.last_error,
      })),
    });
  }
  return out;
}
