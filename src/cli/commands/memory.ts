import { MemoryStore } from '../../memory/store.ts';
import {
  MAX_MEMORY_CHARS,
  MEMORY_KINDS,
  type Memory,
  type MemoryKind,
  type Recalled,
} from '../../memory/types.ts';
import { withInstancePostgres } from '../instance-pg.ts';
import { age, CliError, EXIT, out, table } from '../output.ts';
import { positiveInt } from '../target.ts';

/** The most memories one `list` prints, and one `search` recalls (the store's own limits). */
const MAX_LIST = 1000;
const MAX_K = 50;
/** The first characters of a memory a table row shows. */
const BODY_CHARS = 80;

/** The instance's memory store (its Postgres); an instance without one has no memories. */
async function withStore<T>(
  name: string | undefined,
  fn: (m: MemoryStore, instance: string) => Promise<T>,
): Promise<T> {
  return withInstancePostgres(name, 'no memories', async (pool, instance) => {
    try {
      return await fn(new MemoryStore(pool), instance);
    } catch (e) {
      // An instance whose Postgres was migrated before memories existed (a `holt up` or an operator
      // older than them): the table comes with the next start, or the operator's migration Job.
      if ((e as { code?: string }).code === '42P01')
        throw new CliError(
          `the Postgres of '${instance}' has no memory table yet: it comes with its next start (holt down, then holt up; on a cluster, the operator's migration)`,
          EXIT.notFound,
        );
      throw e;
    }
  });
}

function kindsOf(kind: string | undefined): MemoryKind[] | undefined {
  if (kind === undefined) return undefined;
  const kinds = kind.split(',').map((k) => k.trim());
  const bad = kinds.filter((k) => !(MEMORY_KINDS as readonly string[]).includes(k));
  if (bad.length || !kinds.length)
    throw new CliError(`--kind: "${kind}" must be one or more of ${MEMORY_KINDS.join(', ')}`, EXIT.usage);
  return kinds as MemoryKind[];
}

function upTo(flag: string, value: string | undefined, def: number, max: number): number {
  if (value === undefined) return def;
  const n = positiveInt(flag, value);
  if (n > max) throw new CliError(`${flag}: ${n} is more than ${max}`, EXIT.usage);
  return n;
}

/** One line of a memory: its words on one line, cut to about 80 characters. */
export function firstWords(body: string, chars = BODY_CHARS): string {
  const flat = body.replace(/\s+/g, ' ').trim();
  return flat.length > chars ? `${flat.slice(0, chars - 1)}…` : flat;
}

/** The table of `list` and `search`: id, whose, kind, authority, uses, age, its first words. */
export function memoryTable(memories: Memory[], now = Date.now()): string[] {
  return table([
    ['ID', 'AGENT', 'SCOPE', 'KIND', 'AUTHORITY', 'USES', 'AGE', 'MEMORY'],
    ...memories.map((m) => [
      m.id,
      m.role,
      m.scope,
      m.kind,
      m.authority,
      String(m.uses),
      age(m.createdAtMs, now),
      firstWords(m.body),
    ]),
  ]);
}

/** `holt memory list [--role ROLE] [--kind KIND] [--limit N]`: the newest live memories. */
export async function memoryList(o: {
  name?: string;
  role?: string;
  kind?: string;
  limit?: string;
  json?: boolean;
}): Promise<void> {
  const kinds = kindsOf(o.kind);
  const limit = upTo('--limit', o.limit, 50, MAX_LIST);
  await withStore(o.name, async (m, instance) => {
    const list = await m.list({ instance, role: o.role, kinds, limit });
    if (o.json) return out(JSON.stringify(list, null, 2));
    if (!list.length)
      return out(
        `No memories${o.role ? ` of ${o.role} or its Holt` : ''}${kinds ? ` of kind ${kinds.join(', ')}` : ''} in '${instance}'.`,
      );
    for (const l of memoryTable(list)) out(l);
    if (list.length === limit) out(`(the newest ${limit}; --limit shows more)`);
  });
}

/**
 * `holt memory search ROLE "text" [--k N] [--kind KIND]`: what the agent would recall for these words
 * (its memories and its Holt's), by full-text only, and without counting it as a recall (`touch: false`).
 */
export async function memorySearch(
  role: string,
  text: string,
  o: { name?: string; k?: string; kind?: string; json?: boolean },
): Promise<void> {
  const kinds = kindsOf(o.kind);
  const k = upTo('--k', o.k, 5, MAX_K);
  if (!text.trim()) throw new CliError('search: the text to search for is empty', EXIT.usage);
  if (text.length > MAX_MEMORY_CHARS)
    throw new CliError(`search: the text is longer than ${MAX_MEMORY_CHARS} characters`, EXIT.usage);
  await withStore(o.name, async (m, instance) => {
    const found: Recalled[] = await m.search({ instance, role, text, k, kinds, touch: false });
    if (o.json) return out(JSON.stringify(found, null, 2));
    if (!found.length) return out(`No memory of ${role} or its Holt matches "${firstWords(text, 40)}".`);
    for (const l of memoryTable(found)) out(l);
  });
}

/**
 * `holt memory forget ID`, or `holt memory forget --role ROLE --all --yes`: one memory, or every memory
 * an agent wrote (its Holt-wide ones too). Gone for good.
 */
export async function memoryForget(
  id: string | undefined,
  o: { name?: string; role?: string; all?: boolean; yes?: boolean },
): Promise<void> {
  if (id !== undefined && (o.role !== undefined || o.all))
    throw new CliError('forget: give a memory id, or --role ROLE --all, not both', EXIT.usage);
  if (id === undefined && !(o.role && o.all))
    throw new CliError(
      'forget: give a memory id (see `holt memory list`), or --role ROLE --all for every memory of an agent',
      EXIT.usage,
    );
  if (id !== undefined && !/^\d{1,18}$/.test(id))
    throw new CliError(`forget: "${id}" is not a memory id (a number: see \`holt memory list\`)`, EXIT.usage);
  await withStore(o.name, async (m, instance) => {
    if (id !== undefined) {
      const n = await m.forget(instance, { id });
      if (!n) throw new CliError(`no memory ${id} in '${instance}': see \`holt memory list\``, EXIT.notFound);
      return out(`Forgot memory ${id}.`);
    }
    const role = o.role as string;
    if (!o.yes) {
      const live = Object.values((await m.counts(instance))[role] ?? {}).reduce((a, b) => a + b, 0);
      throw new CliError(
        `forget --all: this forgets every memory ${role} wrote in '${instance}' (${live} live), for good: add --yes`,
        EXIT.usage,
      );
    }
    const n = await m.forget(instance, { role });
    if (!n) throw new CliError(`${role} has no memories in '${instance}'`, EXIT.notFound);
    out(`Forgot ${n} ${n === 1 ? 'memory' : 'memories'} of ${role}.`);
  });
}
