import type { Logger } from '../../common/logger.ts';
import { LABELS_PREAMBLE, type Labels, wrapMessage } from '../../life/labels.ts';
import type { Embedder } from '../../memory/embeddings.ts';
import type { MemoryStore, SaveOutcome } from '../../memory/store.ts';
import type { Memory, MemoryKind, MemoryScope, Recalled, SourceKind } from '../../memory/types.ts';
import type { LlmSettings } from '../config.ts';

export type LongMemorySettings = NonNullable<LlmSettings['longMemory']>;

/** What the Agent's status shows of an agent's memory (`status.memory`, `holt status`). */
export interface MemoryCounts {
  /** Its live memories: those it wrote, its own and those it saved for the Holt. */
  memories: number;
  /** How often those were recalled, in all. */
  recalls: number;
}

/**
 * An LLM agent's long-term memory (src/memory) as its turns use it: saves with the agent's TTL and
 * scope, recalls of its own and its Holt's memories, vectors when an embeddings model is set. An
 * embeddings endpoint that fails costs recall its vectors, never the turn: the save keeps its words and
 * the recall ranks by them (logged once per outage). After each save and each recall of one of its own
 * memories, its counts go to `onCounts` (the agent's status hash), best-effort: serialised and
 * coalesced, never awaited by the turn, a failure logged.
 */
export class LongMemory {
  readonly settings: LongMemorySettings;
  readonly #store: MemoryStore;
  readonly #embedder: Embedder | undefined;
  readonly #instance: string;
  readonly #log: Logger;
  readonly #onCounts: ((role: string, c: MemoryCounts) => Promise<void>) | undefined;
  #embedFailing = false;
  /** Roles whose counts changed since they were last published, and the pass publishing them. */
  readonly #dirty = new Set<string>();
  #publishing: Promise<void> | undefined;

  constructor(o: {
    store: MemoryStore;
    embedder?: Embedder;
    settings: LongMemorySettings;
    instance: string;
    log: Logger;
    /** Where the counts go after a change (the pup: its `agent_status` hash). */
    onCounts?: (role: string, c: MemoryCounts) => Promise<void>;
  }) {
    this.settings = o.settings;
    this.#store = o.store;
    this.#embedder = o.embedder;
    this.#instance = o.instance;
    this.#log = o.log;
    this.#onCounts = o.onCounts;
  }

  /** An agent's counts now: live memories as recall sees them (src/memory/store.ts LIVE), and their uses. */
  counts(role: string): Promise<MemoryCounts> {
    return this.#store.ownCounts(this.#instance, role);
  }

  /**
   * Sends an agent's counts to `onCounts` (once at the pup's start, then after each change); resolves
   * when they are sent or failed (logged), never rejects. Calls during a pass coalesce into one more.
   */
  publishCounts(role: string): Promise<void> {
    if (!this.#onCounts) return Promise.resolve();
    this.#dirty.add(role);
    this.#publishing ??= this.#publish().finally(() => {
      this.#publishing = undefined;
      // Marked between the pass's last look and its end: one more pass.
      const [next] = this.#dirty;
      if (next !== undefined) void this.publishCounts(next);
    });
    return this.#publishing;
  }

  async #publish(): Promise<void> {
    for (let [role] = this.#dirty; role !== undefined; [role] = this.#dirty) {
      this.#dirty.delete(role);
      try {
        await this.#onCounts?.(role, await this.counts(role));
      } catch (e) {
        this.#log.warn(
          { event_type: 'memory_status_failed', error: String(e) },
          "the memory's counts were not published: the agent's status shows the last ones",
        );
      }
    }
  }

  async save(
    role: string,
    m: {
      body: string;
      kind: MemoryKind;
      scope?: MemoryScope;
      source: { kind: SourceKind; id?: string };
      labels: Labels;
    },
  ): Promise<{ memory: Memory; outcome: SaveOutcome }> {
    const embedding = await this.#vector(m.body);
    const ttlDays = this.settings.ttlDays;
    const saved = await this.#store.save({
      instance: this.#instance,
      role,
      scope: m.scope ?? this.settings.scope,
      kind: m.kind,
      body: m.body,
      source: m.source,
      labels: m.labels,
      ...(ttlDays > 0 ? { ttlMs: ttlDays * 86_400_000 } : {}),
      ...(embedding ? { embedding } : {}),
    });
    void this.publishCounts(role);
    return saved;
  }

  /** The `k` memories most relevant to `text` (counted as recalled). */
  async recall(role: string, text: string, k: number, kinds?: MemoryKind[]): Promise<Recalled[]> {
    if (k <= 0 || !text.trim()) return [];
    const embedding = await this.#vector(text);
    const recalled = await this.#store.search({
      instance: this.#instance,
      role,
      text: text.slice(0, 4_000),
      k,
      ...(kinds ? { kinds } : {}),
      ...(embedding ? { embedding } : {}),
    });
    // Their uses grew: the writers' recall counts (this agent's, when it wrote one of them).
    if (recalled.some((m) => m.role === role)) void this.publishCounts(role);
    return recalled;
  }

  async #vector(text: string): Promise<{ model: string; vector: number[] } | undefined> {
    if (!this.#embedder) return undefined;
    try {
      const [vector] = await this.#embedder.embed([text]);
      if (this.#embedFailing)
        this.#log.info({ event_type: 'embeddings_recovered' }, 'embeddings answer again');
      this.#embedFailing = false;
      return vector ? { model: this.#embedder.model, vector } : undefined;
    } catch (e) {
      if (!this.#embedFailing)
        this.#log.warn(
          { event_type: 'embeddings_failed', error: String(e) },
          'embeddings failed: memories are saved and recalled by their words alone until they answer',
        );
      this.#embedFailing = true;
      return undefined;
    }
  }
}

/**
 * Recalled memories as the model reads them: each wrapped in labels that carry the memory's own
 * authority (never more than a note; external evidence when drawn from outside content), its kind,
 * its number and where it came from.
 */
export function showRecalled(recalled: readonly Recalled[]): string {
  if (!recalled.length) return 'No memory matches.';
  return [
    `${recalled.length} memor${recalled.length === 1 ? 'y' : 'ies'} recalled. ${LABELS_PREAMBLE}`,
    ...recalled.map((m) =>
      wrapMessage(
        {
          origin: m.labels.origin,
          surface: `memory ${m.id} (${m.kind}, ${m.scope === 'holt' ? `the Holt's, from ${m.role}` : 'yours'}; first via ${m.labels.surface})`,
          admission: m.labels.admission,
          authority: m.authority,
        },
        m.body,
        m.createdAtMs,
      ),
    ),
  ].join('\n');
}
