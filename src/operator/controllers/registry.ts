import { registrationOf } from '../../api/registry.ts';
import { Blackboard } from '../../blackboard/client.ts';
import { getAgents, setAgents } from '../../blackboard/registry.ts';
import type { AgentRegistration } from '../../blackboard/types.ts';
import type { Logger } from '../../common/logger.ts';
import { canonical } from '../kube/apply.ts';
import type { Cache } from '../kube/cache.ts';
import { endpointKey, endpointOf, type StoreEndpoint } from '../kube/endpoint.ts';
import type { AgentImages } from './agentimages.ts';
import { holtOf, keyOf, parseAgent } from './resources.ts';

export interface HoltRef {
  namespace: string;
  name: string;
}

/** Writes a Holt's runtime agent registry (the orchestrator's `holt:{instance}:agents`). */
export interface RegistryWriter {
  /** Replaces the registry with `agents` (sorted by role). Throws when the store is unreachable. */
  write(holt: HoltRef, agents: AgentRegistration[]): Promise<void>;
  close?(): Promise<void>;
}

/** Resolves the Redis URL of a Holt (the operator reads the generated Secret or the external ref). */
export type RedisUrlResolver = (holt: HoltRef) => Promise<StoreEndpoint>;

/**
 * One Blackboard connection per Holt's Redis, shared by the registry writer and the runtime reader
 * (re-opened when the Holt's URL changes). Fails fast while the Redis is not up yet: callers retry.
 */
export class HoltBoards {
  readonly #resolve: RedisUrlResolver;
  readonly #boards = new Map<string, { url: string; bb: Blackboard }>();

  constructor(resolve: RedisUrlResolver) {
    this.#resolve = resolve;
  }

  async board(holt: HoltRef): Promise<Blackboard> {
    const key = keyOf(holt.namespace, holt.name);
    const endpoint = await this.#resolve(holt);
    const url = endpointKey(endpoint);
    const have = this.#boards.get(key);
    if (have?.url === url) return have.bb;
    await have?.bb.close();
    const { url: redisUrl, ca } = endpointOf(endpoint);
    const bb = Blackboard.connect(redisUrl, holt.name, {
      maxRetriesPerRequest: 1,
      connectTimeout: 2_000,
      // A Redis whose pod went away without closing the connection never answers: the command fails
      // instead, and the reconcile waiting on it is retried (no timeout would hold its queue slot).
      commandTimeout: 5_000,
      retryStrategy: (n) => Math.min(n * 500, 5_000),
      ...(ca ? { tls: { ca } } : {}),
    });
    bb.redis.on('error', () => undefined);
    this.#boards.set(key, { url, bb });
    return bb;
  }

  async close(): Promise<void> {
    await Promise.all([...this.#boards.values()].map((b) => b.bb.close()));
    this.#boards.clear();
  }
}

/**
 * The real writer: Blackboard.setAgents against the Holt's own Redis, only when what is stored
 * differs (a restarted operator must not bump the registry revision and wake every orchestrator).
 */
export class RedisRegistryWriter implements RegistryWriter {
  readonly #boards: HoltBoards;

  /** A resolver (own connections) or connections shared with a runtime reader. */
  constructor(boards: RedisUrlResolver | HoltBoards) {
    this.#boards = boards instanceof HoltBoards ? boards : new HoltBoards(boards);
  }

  async write(holt: HoltRef, agents: AgentRegistration[]): Promise<void> {
    const bb = await this.#boards.board(holt);
    const current = await getAgents(bb);
    const sort = (a: AgentRegistration[]) => [...a].sort((x, y) => x.role.localeCompare(y.role));
    if (current.invalid.length === 0 && canonical(sort(current.agents)) === canonical(sort(agents))) return;
    await setAgents(bb, agents);
  }

  async close(): Promise<void> {
    await this.#boards.close();
  }
}

/**
 * Keeps each Holt's registry in step with the Agent resources that name it. Agents being deleted
 * are left out (their finalizer waits for this). The last successful write is remembered so the
 * steady state costs nothing.
 */
export class RegistrySync {
  readonly #writer: RegistryWriter;
  readonly #cache: Cache;
  readonly #log: Logger;
  readonly #written = new Map<string, string>();
  readonly #images?: AgentImages;

  /** `images`: each role's image digest from its pods, recorded as Holt records it (agent_images). */
  constructor(writer: RegistryWriter, cache: Cache, log: Logger, images?: AgentImages) {
    this.#writer = writer;
    this.#cache = cache;
    this.#log = log;
    this.#images = images;
  }

  /** The registry the Agents of this Holt call for (valid, not deleting, sorted by role). */
  desired(holt: HoltRef): AgentRegistration[] {
    const out: AgentRegistration[] = [];
    for (const a of this.#cache.list('Agent', holt.namespace)) {
      if (holtOf(a) !== holt.name || a.metadata.deletionTimestamp) continue;
      const p = parseAgent(a);
      if (!p.ok) continue;
      const image = this.#images?.get(holt, p.spec.role);
      out.push({ ...registrationOf(p.spec), ...(image ? { image_id: image } : {}) });
    }
    return out.sort((x, y) => x.role.localeCompare(y.role));
  }

  /** Writes when the desired registry differs from the last one written; throws when it cannot. */
  async sync(holt: HoltRef): Promise<{ changed: boolean; agents: number }> {
    const agents = this.desired(holt);
    const key = keyOf(holt.namespace, holt.name);
    const body = canonical(agents);
    if (this.#written.get(key) === body) return { changed: false, agents: agents.length };
    await this.#writer.write(holt, agents);
    this.#written.set(key, body);
    this.#log.info(
      { event_type: 'registry_written', holt: key, agents: agents.map((a) => a.role) },
      'agent registry updated',
    );
    return { changed: true, agents: agents.length };
  }

  forget(holt: HoltRef): void {
    this.#written.delete(keyOf(holt.namespace, holt.name));
  }
}
