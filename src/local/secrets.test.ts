import { mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { instanceDir } from './instance.ts';
import { instanceSecrets } from './secrets.ts';

let home = '';
const saved = process.env.HOLT_HOME;
beforeEach(() => {
  home = mkdtempSync(join(process.env.HOLT_TEST_TMP ?? tmpdir(), 'secrets-'));
  process.env.HOLT_HOME = home;
});
afterEach(() => {
  if (saved === undefined) delete process.env.HOLT_HOME;
  else process.env.HOLT_HOME = saved;
  rmSync(home, { recursive: true, force: true });
});

describe('a local instance’s store passwords', () => {
  it('an instance made when Postgres had one runtime role keeps its owner and gains a role per component', () => {
    const dir = instanceDir('old');
    mkdirSync(dir, { recursive: true });
    const p = (c: string) => c.repeat(32);
    const principals = { admin: p('a'), orchestrator: p('b'), pup: p('c'), operator: p('d'), tool: p('e') };
    writeFileSync(
      join(dir, 'secrets.json'),
      JSON.stringify({ redis: principals, nats: principals, postgres: { owner: p('f'), app: p('g') } }),
      { mode: 0o600 },
    );
    const s = instanceSecrets('old');
    expect(s.postgres.owner).toBe(p('f'));
    expect(s.redis).toEqual(principals);
    const fresh = [s.postgres.orchestrator, s.postgres.pup, s.postgres.operator];
    for (const pw of fresh) expect(pw).toMatch(/^[0-9a-f]{48}$/);
    expect(new Set(fresh).size).toBe(3);
    // Written back (0600), so the next `holt up` and the roles it made agree.
    const file = join(dir, 'secrets.json');
    expect(JSON.parse(readFileSync(file, 'utf8')).postgres).toEqual({
      owner: p('f'),
      orchestrator: s.postgres.orchestrator,
      pup: s.postgres.pup,
      operator: s.postgres.operator,
    });
    expect(statSync(file).mode & 0o777).toBe(0o600);
    expect(instanceSecrets('old')).toEqual(s);
  });
});
