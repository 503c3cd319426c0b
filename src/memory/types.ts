import { z } from 'zod';
import { Labels } from '../life/labels.ts';

/** What a memory is, as stored and as given to a caller (parsed from its row: a bad row is an error). */

export const MEMORY_KINDS = ['action', 'observation', 'report', 'note'] as const;
export type MemoryKind = (typeof MEMORY_KINDS)[number];
export const MEMORY_SCOPES = ['agent', 'holt'] as const;
export type MemoryScope = (typeof MEMORY_SCOPES)[number];
export const SOURCE_KINDS = ['turn', 'artefact', 'work_item', 'message', 'operator'] as const;
export type SourceKind = (typeof SOURCE_KINDS)[number];

/** The longest memory kept (a memory is a note, not a transcript). */
export const MAX_MEMORY_CHARS = 4_000;

export const NewMemory = z.object({
  instance: z.string().min(1),
  /** The agent that writes it (a Holt-wide memory names its writer too). */
  role: z.string().min(1),
  scope: z.enum(MEMORY_SCOPES).default('agent'),
  kind: z.enum(MEMORY_KINDS),
  body: z.string().trim().min(1).max(MAX_MEMORY_CHARS),
  source: z.object({ kind: z.enum(SOURCE_KINDS), id: z.string().max(200).optional() }),
  /** The provenance of what it was drawn from; its authority decides the memory's (rank.ts). */
  labels: Labels,
  /** How long it is kept unless recalled often; none: until forgotten. */
  ttlMs: z.number().int().positive().optional(),
  embedding: z.object({ model: z.string().min(1), vector: z.array(z.number().finite()).min(1) }).optional(),
});
export type NewMemory = z.input<typeof NewMemory>;

export const MemoryRow = z.object({
  id: z.coerce.string(),
  instance: z.string(),
  scope: z.enum(MEMORY_SCOPES),
  role: z.string(),
  kind: z.enum(MEMORY_KINDS),
  body: z.string(),
  source_kind: z.enum(SOURCE_KINDS),
  source_id: z.string().nullable(),
  labels: Labels,
  authority: z.enum(['agent_note', 'external_evidence']),
  merged: z.number().int(),
  uses: z.number().int(),
  embedding_model: z.string().nullable(),
  created_at: z.date(),
  expires_at: z.date().nullable(),
});
export type MemoryRow = z.infer<typeof MemoryRow>;

export interface Memory {
  id: string;
  instance: string;
  scope: MemoryScope;
  role: string;
  kind: MemoryKind;
  body: string;
  source: { kind: SourceKind; id?: string };
  labels: Labels;
  authority: 'agent_note' | 'external_evidence';
  /** How many saves were folded into it (duplicates, near or exact). */
  merged: number;
  /** How often it was recalled. */
  uses: number;
  embedded: boolean;
  createdAtMs: number;
  expiresAtMs?: number;
}

export const memoryOf = (r: MemoryRow): Memory => ({
  id: r.id,
  instance: r.instance,
  scope: r.scope,
  role: r.role,
  kind: r.kind,
  body: r.body,
  source: { kind: r.source_kind, ...(r.source_id ? { id: r.source_id } : {}) },
  labels: r.labels,
  authority: r.authority,
  merged: r.merged,
  uses: r.uses,
  embedded: r.embedding_model !== null,
  createdAtMs: r.created_at.getTime(),
  ...(r.expires_at ? { expiresAtMs: r.expires_at.getTime() } : {}),
});

/** A recalled memory with how it ranked. */
export interface Recalled extends Memory {
  score: number;
  /** Its rank (1-based) in the full-text and the vector ranking, where it was in them. */
  ranks: { text?: number; vector?: number };
  /** The cosine to the query's vector, where both had one. */
  similarity?: number;
}

export const MemoryQuery = z.object({
  instance: z.string().min(1),
  /** Whose memories: this agent's and its Holt's. */
  role: z.string().min(1),
  text: z.string().trim().min(1).max(MAX_MEMORY_CHARS),
  k: z.number().int().min(1).max(50).default(5),
  kinds: z.array(z.enum(MEMORY_KINDS)).optional(),
  /** The query's vector (same model as the memories'); none: full-text only. */
  embedding: z.object({ model: z.string().min(1), vector: z.array(z.number().finite()).min(1) }).optional(),
  /** Count the result as recalled (uses + 1): yes for what a model is given, no for a person's look. */
  touch: z.boolean().default(true),
});
export type MemoryQuery = z.input<typeof MemoryQuery>;
