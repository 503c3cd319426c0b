import { z } from 'zod';
import type { Blackboard } from '../blackboard/client.ts';
import { getAgents } from '../blackboard/registry.ts';
import { parseEnv } from '../common/config.ts';
import type { Logger } from '../common/logger.ts';
import { startIngressServer } from '../ingress/server.ts';
import { tokenSource } from '../ingress/tokens.ts';
import { LifeStore } from '../life/store.ts';
import type { OrchestratorInbox } from './inbox.ts';

export const IngressEnv = z.object({
  /** The ingress port (0: no ingress). The operator sets it when an Agent asks for ingress. */
  HOLT_INGRESS_PORT: z.coerce.number().int().min(0).max(65535).default(0),
  HOLT_INGRESS_TOKENS_FILE: z.string().min(1).default('/etc/holt/ingress/tokens.json'),
});

/**
 * The orchestrator's external ingress for living agents (src/ingress), when HOLT_INGRESS_PORT is set
 * and the inbox (Postgres, NATS) is there: messages and wake hints queued in Postgres, then a doorbell.
 */
export async function startOrchestratorIngress(o: {
  instance: string;
  env: NodeJS.ProcessEnv;
  bb: Blackboard;
  inbox: OrchestratorInbox;
  log: Logger;
}): Promise<{ port: number; close(): Promise<void> } | undefined> {
  const env = parseEnv(IngressEnv, o.env);
  if (!env.HOLT_INGRESS_PORT) return undefined;
  const store = o.inbox.store;
  if (!store) {
    o.log.warn(
      { event_type: 'ingress_disabled', reason: 'no DATABASE_URL/NATS_URL' },
      'no ingress without the inbox',
    );
    return undefined;
  }
  const log = o.log.child({ component: 'ingress' });
  const srv = await startIngressServer({
    instance: o.instance,
    port: env.HOLT_INGRESS_PORT,
    life: new LifeStore(store.pool),
    tokens: tokenSource(env.HOLT_INGRESS_TOKENS_FILE, (e) =>
      log.error(
        { event_type: 'ingress_tokens_unreadable', error: e.message },
        'token file unreadable; keeping the last good one',
      ),
    ),
    knows: async (role) => (await getAgents(o.bb)).agents.some((a) => a.role === role),
    ring: (role) => o.inbox.wakeLife(role),
    log,
  });
  log.info({ event_type: 'ingress_started', port: srv.port }, `ingress on :${srv.port}`);
  return srv;
}
