import { createHash, randomUUID } from 'node:crypto';
import type pg from 'pg';
import { tx } from '../state/sql.ts';
import type { TraceCarrier } from '../telemetry/carrier.ts';
import { type Labels, Labels as LabelsSchema } from './labels.ts';

/**
 * The ingress's one write: a message or a wake hint queued for a living agent (the scheduler, in
 * store.ts, delivers it to a turn).
 */

export type Enqueued =
  | { kind: 'queued' | 'duplicate'; id: string }
  | { kind: 'stopped' }
  | { kind: 'full'; undelivered: number };

export interface EnqueueRequest {
  instance: string;
  role: string;
  key: string;
  kind: 'message' | 'wake';
  body?: string;
  labels: Labels;
  /** The ingress token's id: its keys are its own (holt.ingress_idempotency). */
  scope?: string;
  maxUndelivered?: number;
  /** The caller's trace context (the ingress's `traceparent` header): the turn it wakes continues it. */
  trace?: TraceCarrier;
  /** Where its outcome is delivered: a callback its token registered (replies.ts), by name and URL. */
  reply?: { tokenName: string; callback: string; url: string };
}

/** The agent's life row, made (running) if it has none. */
export const ensureLifeRow = (c: pg.PoolClient, instance: string, role: string) =>
  c.query('INSERT INTO holt.agent_life (instance, role) VALUES ($1, $2) ON CONFLICT DO NOTHING', [
    instance,
    role,
  ]);

/**
 * Queues a message or a wake hint, once per idempotency key (a repeat is a no-op and says so). A
 * stopped agent queues nothing. Wakes carry no body: their payload is never kept. With `scope` (the
 * ingress: its token's id) a key is that caller's alone, and a hash of it stays in
 * holt.ingress_idempotency after the message is pruned, so a late replay is still a duplicate. With
 * `maxUndelivered`, an agent already holding that many undelivered messages queues nothing ('full').
 */
export async function enqueueMessage(pool: pg.Pool, m: EnqueueRequest): Promise<Enqueued> {
  const labels = LabelsSchema.parse(m.labels);
  const key = m.scope === undefined ? m.key : `${m.scope}/${m.key}`;
  const keyHash = createHash('sha256').update(m.key, 'utf8').digest('hex');
  return tx<Enqueued>(pool, async (c) => {
    await ensureLifeRow(c, m.instance, m.role);
    // FOR UPDATE, not FOR SHARE: the same transaction updates the row below, and two that each
    // held a share lock and wanted it exclusive would deadlock (the benchmark found it). It also
    // serialises an agent's enqueues, so the duplicate and backlog checks below cannot race.
    const life = await c.query<{ state: string }>(
      'SELECT state FROM holt.agent_life WHERE instance = $1 AND role = $2 FOR UPDATE',
      [m.instance, m.role],
    );
    if (life.rows[0]?.state === 'stopped') return { value: { kind: 'stopped' as const } };
    const seen =
      m.scope === undefined
        ? await c.query<{ id: string }>(
            'SELECT id FROM holt.agent_messages WHERE instance = $1 AND role = $2 AND idempotency_key = $3',
            [m.instance, m.role, key],
          )
        : await c.query<{ id: string }>(
            `SELECT message_id AS id FROM holt.ingress_idempotency
             WHERE instance = $1 AND role = $2 AND token_id = $3 AND key_hash = $4`,
            [m.instance, m.role, m.scope, keyHash],
          );
    if (seen.rows[0]) return { value: { kind: 'duplicate' as const, id: String(seen.rows[0].id) } };
    if (m.maxUndelivered !== undefined) {
      const n = await c.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM (SELECT 1 FROM holt.agent_messages
           WHERE instance = $1 AND role = $2 AND turn_id IS NULL LIMIT $3) u`,
        [m.instance, m.role, m.maxUndelivered],
      );
      const undelivered = n.rows[0]?.n ?? 0;
      if (undelivered >= m.maxUndelivered) return { value: { kind: 'full' as const, undelivered } };
    }
    const r = await c.query<{ id: string }>(
      `INSERT INTO holt.agent_messages (instance, role, idempotency_key, kind, body, labels, traceparent, tracestate,
         priority)
       VALUES ($1, $2, $3, $4, $5, $6::jsonb, $7, $8, $9) ON CONFLICT (instance, role, idempotency_key) DO NOTHING
       RETURNING id`,
      [
        m.instance,
        m.role,
        key,
        m.kind,
        m.kind === 'wake' ? null : (m.body ?? ''),
        JSON.stringify(labels),
        m.trace?.traceparent ?? null,
        m.trace?.tracestate ?? null,
        labels.priority ?? 0,
      ],
    );
    if (!r.rows[0]) {
      // A key the scoped table did not know but a message holds (queued before it existed).
      const old = await c.query<{ id: string }>(
        'SELECT id FROM holt.agent_messages WHERE instance = $1 AND role = $2 AND idempotency_key = $3',
        [m.instance, m.role, key],
      );
      return { value: { kind: 'duplicate' as const, id: String(old.rows[0]?.id) } };
    }
    const id = String(r.rows[0].id);
    if (m.scope !== undefined)
      await c.query(
        `INSERT INTO holt.ingress_idempotency (instance, role, token_id, key_hash, message_id)
         VALUES ($1, $2, $3, $4, $5)`,
        [m.instance, m.role, m.scope, keyHash, id],
      );
    if (m.reply)
      await c.query(
        `INSERT INTO holt.message_replies (id, instance, role, message_id, token_name, callback, url)
         VALUES ($1, $2, $3, $4, $5, $6, $7)`,
        [randomUUID(), m.instance, m.role, id, m.reply.tokenName, m.reply.callback, m.reply.url],
      );
    await c.query('UPDATE holt.agent_life SET last_message_at = now() WHERE instance = $1 AND role = $2', [
      m.instance,
      m.role,
    ]);
    return { value: { kind: 'queued' as const, id } };
  });
}
