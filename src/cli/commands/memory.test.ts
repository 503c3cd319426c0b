import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../../../test/harness/ports.ts';
import { type PostgresServer, startPostgres } from '../../../test/harness/postgres.ts';
import { makeTempDir, removeDir } from '../../../test/harness/tmp.ts';
import { createPool } from '../../common/pg.ts';
import { agentLabels, labelsOf } from '../../life/labels.ts';
import { MemoryStore } from '../../memory/store.ts';
import type { Memory, NewMemory } from '../../memory/types.ts';
import { migrate } from '../../state/migrate.ts';
import { firstWords } from './memory.ts';

// `holt memory` as a person runs it: the real binary, on a local instance as `holt up` records it (its
// supervisor: a live process that says __supervise) whose Postgres is a real one, migrated.

const HOLT = join(import.meta.dirname, '..', '..', '..', 'bin', 'holt');
const I = 'memcli';
const EMPTY = 'memempty';
const DOWN = 'memdown';
const NO_PG = 'memnopg';

let postgres: PostgresServer;
let pool: pg.Pool;
let store: MemoryStore;
let home: string;
let supervisor: ChildProcess;
const saved: Record<string, Memory> = {};

async function save(key: string, m: Partial<NewMemory> & Pick<NewMemory, 'role' | 'kind' | 'body'>) {
  const r = await store.save({
    instance: I,
    labels: agentLabels('memory_save'),
    source: { kind: 'turn' },
    ...m,
  });
  saved[key] = r.memory;
}

function instance(name: string, postgresUrl?: string) {
  mkdirSync(join(home, 'instances', name), { recursive: true });
  const state = {
    name,
    workspace: home,
    holtFile: join(home, 'holt.yml'),
    supervisorPid: supervisor.pid,
    startedAt: Date.now(),
    status: 'running',
    redisUrl: 'redis://127.0.0.1:1',
    ...(postgresUrl ? { postgresUrl } : {}),
  };
  writeFileSync(join(home, 'instances', name, 'state.json'), JSON.stringify(state));
}

async function holt(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const r = await promisify(execFile)(HOLT, args, {
      env: { ...process.env, HOLT_HOME: home, NO_COLOR: '1', HOLT_PG_CONNECT_TIMEOUT_MS: '3000' },
    });
    return { code: 0, stdout: r.stdout, stderr: r.stderr };
  } catch (e) {
    const x = e as { code: number; stdout: string; stderr: string };
    return { code: x.code, stdout: x.stdout, stderr: x.stderr };
  }
}

async function ok(args: string[]): Promise<string> {
  const r = await holt(args);
  if (r.code !== 0) throw new Error(`holt ${args.join(' ')} failed (${r.code}): ${r.stderr}`);
  return r.stdout;
}

const LONG = `The deploy script needs the ${'very '.repeat(20)}long flag --no-cache on the staging host.`;

beforeAll(async () => {
  postgres = await startPostgres();
  await migrate(postgres.url);
  pool = createPool(postgres.url, { max: 2 });
  store = new MemoryStore(pool);
  home = makeTempDir('memory-cli-home');
  supervisor = spawn(process.execPath, ['-e', 'setInterval(() => {}, 1 << 30)', '__supervise'], {
    stdio: 'ignore',
  });
  instance(I, postgres.url);
  instance(EMPTY, postgres.url);
  instance(DOWN, `postgresql://holt:x@127.0.0.1:${await freePort()}/holt`);
  instance(NO_PG);
  await save('report', {
    role: 'Coder',
    kind: 'report',
    body: 'Fixed the flaky login test by pinning the clock.',
  });
  await save('long', { role: 'Coder', kind: 'observation', body: LONG });
  await save('holt', {
    role: 'Reviewer',
    scope: 'holt',
    kind: 'note',
    body: 'The staging database is reset every Sunday at 02:00.',
  });
  await save('webhook', {
    role: 'Reviewer',
    kind: 'observation',
    body: 'CI says the login test failed on main.',
    labels: labelsOf('webhook', 'message', 'POST /v1/agents/Reviewer/messages', 'token ci'),
  });
});

afterAll(async () => {
  supervisor?.kill('SIGKILL');
  await pool?.end();
  await postgres?.stop();
  if (home) removeDir(home);
});

describe('holt memory list', () => {
  it('a table of the newest: id, agent, scope, kind, authority, uses, age and the first 80 characters', async () => {
    const lines = (await ok(['memory', 'list', '--name', I])).trimEnd().split('\n');
    expect(lines[0]).toMatch(/^ID\s+AGENT\s+SCOPE\s+KIND\s+AUTHORITY\s+USES\s+AGE\s+MEMORY$/);
    expect(lines).toHaveLength(5);
    // Newest first.
    expect(lines[1]).toMatch(
      new RegExp(
        `^${saved.webhook!.id}\\s+Reviewer\\s+agent\\s+observation\\s+external_evidence\\s+0\\s+\\d+s ago\\s+CI says`,
      ),
    );
    expect(lines[2]).toMatch(new RegExp(`^${saved.holt!.id}\\s+Reviewer\\s+holt\\s+note\\s+agent_note\\s`));
    const long = lines.find((l) => l.startsWith(`${saved.long!.id} `))!;
    expect(long.endsWith(firstWords(LONG))).toBe(true);
    expect(firstWords(LONG)).toHaveLength(80);
    expect(firstWords(LONG).endsWith('…')).toBe(true);
  });

  it("--role: that agent's own and its Holt's; --kind, --limit; --json has every field and the whole text", async () => {
    const coder = await ok(['memory', 'list', '--name', I, '--role', 'Coder']);
    const ids = (out: string) =>
      out
        .split('\n')
        .slice(1)
        .filter(Boolean)
        .map((l) => l.split(/\s+/)[0]);
    expect(ids(coder).sort()).toEqual([saved.report!.id, saved.long!.id, saved.holt!.id].sort());
    expect(ids(await ok(['memory', 'list', '--name', I, '--kind', 'report,note']))).toEqual([
      saved.holt!.id,
      saved.report!.id,
    ]);
    const limited = await ok(['memory', 'list', '--name', I, '--limit', '2']);
    expect(ids(limited).filter((x) => /^\d+$/.test(x!))).toHaveLength(2);
    expect(limited).toContain('(the newest 2; --limit shows more)');
    const json = JSON.parse(
      await ok(['memory', 'list', '--name', I, '--role', 'Coder', '--kind', 'observation', '-j']),
    );
    expect(json).toEqual([
      expect.objectContaining({ id: saved.long!.id, body: LONG, scope: 'agent', uses: 0 }),
    ]);
  });

  it('says so when there are none, and refuses a kind or a limit that is none', async () => {
    expect(await ok(['memory', 'list', '--name', EMPTY])).toBe("No memories in 'memempty'.\n");
    expect(await ok(['memory', 'list', '--name', I, '--role', 'Nobody', '--kind', 'action'])).toBe(
      "No memories of Nobody or its Holt of kind action in 'memcli'.\n",
    );
    const kind = await holt(['memory', 'list', '--name', I, '--kind', 'dream']);
    expect(kind.code).toBe(2);
    expect(kind.stderr).toContain('--kind: "dream" must be one or more of action, observation, report, note');
    const limit = await holt(['memory', 'list', '--name', I, '--limit', '5000']);
    expect(limit.code).toBe(2);
    expect(limit.stderr).toContain('--limit: 5000 is more than 1000');
  });
});

describe('holt memory search', () => {
  it("by words, the agent's own and its Holt's, best first, and a person's look is not counted as a recall", async () => {
    const out = await ok(['memory', 'search', 'Coder', 'login test clock', '--name', I]);
    const lines = out.trimEnd().split('\n');
    expect(lines[0]).toMatch(/^ID\s+AGENT/);
    expect(lines[1]).toMatch(new RegExp(`^${saved.report!.id}\\s+Coder\\s`));
    // The Reviewer's own memory of the login test is not the Coder's to recall.
    expect(out).not.toContain('CI says');
    const holtWide = JSON.parse(
      await ok(['memory', 'search', 'Coder', 'staging Sunday', '--name', I, '--json']),
    );
    expect(holtWide.map((m: { id: string }) => m.id)).toContain(saved.holt!.id);
    expect(holtWide[0].ranks.text).toBe(1);
    const after = await store.list({ instance: I, limit: 10 });
    expect(after.every((m) => m.uses === 0)).toBe(true);
  });

  it('--k bounds it; no match says so; an empty text is refused', async () => {
    const one = JSON.parse(
      await ok(['memory', 'search', 'Coder', 'the staging login deploy', '--k', '1', '--name', I, '-j']),
    );
    expect(one).toHaveLength(1);
    expect(await ok(['memory', 'search', 'Coder', 'kubernetes', '--name', I])).toBe(
      'No memory of Coder or its Holt matches "kubernetes".\n',
    );
    const empty = await holt(['memory', 'search', 'Coder', '  ', '--name', I]);
    expect(empty.code).toBe(2);
    expect(empty.stderr).toContain('the text to search for is empty');
  });
});

describe('holt memory forget', () => {
  it('one by id; an unknown id is not found (exit 3), a word that is no id a usage error (exit 2)', async () => {
    expect(await ok(['memory', 'forget', saved.report!.id, '--name', I])).toBe(
      `Forgot memory ${saved.report!.id}.\n`,
    );
    expect((await store.list({ instance: I, role: 'Coder' })).map((m) => m.id)).not.toContain(
      saved.report!.id,
    );
    const again = await holt(['memory', 'forget', saved.report!.id, '--name', I]);
    expect(again.code).toBe(3);
    expect(again.stderr).toContain(`no memory ${saved.report!.id} in 'memcli': see \`holt memory list\``);
    const word = await holt(['memory', 'forget', 'abc', '--name', I]);
    expect(word.code).toBe(2);
    expect(word.stderr).toContain('"abc" is not a memory id');
    // Another instance's memory is not this one's to forget.
    expect((await holt(['memory', 'forget', saved.long!.id, '--name', EMPTY])).code).toBe(3);
  });

  it('every memory of an agent only with --role, --all and --yes: without --yes it says how many and forgets none', async () => {
    const bare = await holt(['memory', 'forget', '--name', I]);
    expect(bare.code).toBe(2);
    expect(bare.stderr).toContain('give a memory id');
    const unconfirmed = await holt(['memory', 'forget', '--role', 'Reviewer', '--all', '--name', I]);
    expect(unconfirmed.code).toBe(2);
    expect(unconfirmed.stderr).toContain(
      "forgets every memory Reviewer wrote in 'memcli' (2 live), for good: add --yes",
    );
    expect(await store.list({ instance: I })).toHaveLength(3);
    expect(await ok(['memory', 'forget', '--role', 'Reviewer', '--all', '--yes', '--name', I])).toBe(
      'Forgot 2 memories of Reviewer.\n',
    );
    // The Holt-wide memory the Reviewer wrote went with it; the Coder's own stays.
    expect((await store.list({ instance: I })).map((m) => m.id)).toEqual([saved.long!.id]);
    const none = await holt(['memory', 'forget', '--role', 'Reviewer', '--all', '--yes', '--name', I]);
    expect(none.code).toBe(3);
    expect(none.stderr).toContain("Reviewer has no memories in 'memcli'");
  });
});

describe('holt memory: where there is no Postgres to read', () => {
  it('a Postgres that does not answer is an error that says so (exit 1); an instance without one is not found (exit 3)', async () => {
    const down = await holt(['memory', 'list', '--name', DOWN]);
    expect(down.code).toBe(1);
    expect(down.stderr).toMatch(
      /the Postgres of 'memdown' does not answer \(.*ECONNREFUSED.*\): is it running\?/,
    );
    const none = await holt(['memory', 'search', 'Coder', 'x', '--name', NO_PG]);
    expect(none.code).toBe(3);
    expect(none.stderr).toContain("instance 'memnopg' has no Postgres, so no memories");
  });
});
