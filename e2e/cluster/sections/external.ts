import { it } from 'vitest';
import { eventually } from '../../../test/harness/wait.ts';
import { expectDemoTrail } from '../../demo-trail.ts';
import { CLUSTER_WAIT, c, holt, kubectl, pods, progress, trailOf, waitHoltReady } from '../ctx.ts';
import { EXT, externalStores, STORES_NS } from '../stores.ts';

/**
 * The real cluster: a Holt on stores it does not own. Redis, NATS and Postgres run as plain pods in
 * another namespace, as a platform team would run them, each with a user per component; the Holt
 * names CloudNativePG's `-app` Secret and a Secret per component. The demo runs on them to the end,
 * every component as its own user. Self-contained (its namespace, its Holt), so concurrent.
 */
export function externalTests(): void {
  it.concurrent('external stores in another namespace, a user per component: the demo finishes; each component connects as its own user and is refused nothing', async ({
    expect,
  }) => {
    const t0 = Date.now();
    const ext = externalStores();
    const inStores = (args: string[]) => c.kubectl(['-n', STORES_NS, ...args]);
    let cleaned = false;
    const cleanUp = async () => {
      await kubectl(['delete', 'agents', '-l', `e2e.holt.io/holt=${EXT}`, '--timeout=120s']);
      await kubectl(['delete', 'holt', EXT, '--ignore-not-found', '--timeout=120s']);
      await kubectl(['delete', 'secrets,configmaps', '-l', `e2e.holt.io/holt=${EXT}`]);
      await c.kubectl(['delete', 'namespace', STORES_NS, '--ignore-not-found', '--timeout=120s']);
    };
    try {
      await c.kubectl(['apply', '-f', '-'], { input: ext.stores });
      await inStores([
        'wait',
        '--for=condition=Ready',
        'pod/redis',
        'pod/nats',
        'pod/postgres',
        '--timeout=180s',
      ]);
      // The platform's roles, made as the superuser on the local socket (CloudNativePG makes its
      // managed roles once the cluster is up, the same way).
      await c.kubectl(
        [
          '-n',
          STORES_NS,
          'exec',
          '-i',
          'postgres',
          '--',
          'psql',
          '-v',
          'ON_ERROR_STOP=1',
          '-U',
          'postgres',
          '-d',
          'postgres',
          '-q',
        ],
        { input: ext.rolesSql },
      );
      progress(`external: stores Ready in ${STORES_NS}`);
      await kubectl(['apply', '-f', '-'], ext.holt);
      await waitHoltReady(EXT, 5);
      progress('external: Holt ext Ready');
      const out = await holt(EXT, ['forage', '--goal', 'publish a plan', '--watch']);
      expect(out).toContain('Workflow completed');

      const [publisher] = await pods(`holt.io/instance=${EXT},holt.io/role=Publisher`);
      const git = (...args: string[]) =>
        kubectl(['exec', publisher?.metadata.name ?? 'none', '--', 'git', '-C', '/workspace', ...args]);
      const trail = await trailOf(EXT);
      const head = (await git('log', '--format=%H %s', '-1')).trim();
      const show = (await git('show', 'HEAD:docs/plan.md')).trim();
      expectDemoTrail(trail, (...a) => (a[0] === 'show' ? show : head));

      // Redis: the orchestrator, the pups and the operator each on its own ACL user, and none refused
      // a command or a key (the ACL log records every denial).
      const redis = (...args: string[]) =>
        inStores([
          'exec',
          'redis',
          '--',
          'redis-cli',
          '--user',
          'admin',
          '--pass',
          ext.redisAdmin,
          '--no-auth-warning',
          ...args,
        ]);
      const redisUsers = await eventually(
        'every component on its own Redis user',
        async () => {
          const users = new Set(
            [...(await redis('CLIENT', 'LIST')).matchAll(/ user=(\S+)/g)].map((m) => m[1]),
          );
          return ['orchestrator', 'pup', 'operator'].every((u) => users.has(u)) ? users : undefined;
        },
        CLUSTER_WAIT,
      );
      expect([...redisUsers].sort()).toEqual(['admin', 'operator', 'orchestrator', 'pup']);
      expect((await redis('ACL', 'LOG')).trim()).toBe('');

      // NATS: the orchestrator on its own user (and whoever else connects, on theirs); the server
      // logged no violation. Its monitor port, read from a pod of the cluster (the store's image may
      // have no HTTP client): the e2e's LLM server runs the runtime image.
      type Connz = { connections?: { authorized_user?: string }[] };
      const natsIp = (await inStores(['get', 'pod', 'nats', '-o', 'jsonpath={.status.podIP}'])).trim();
      const fetchJs = `fetch('http://${natsIp}:8222/connz?auth=true').then((r) => r.text()).then(console.log)`;
      const natsUsers = await eventually(
        'the orchestrator on its own NATS user',
        async () => {
          const connz = JSON.parse(
            await kubectl(['exec', 'deploy/llm', '--', 'node', '-e', fetchJs]),
          ) as Connz;
          const users = new Set((connz.connections ?? []).map((x) => x.authorized_user));
          return users.has('orchestrator') ? users : undefined;
        },
        CLUSTER_WAIT,
      );
      expect([...natsUsers].every((u) => u && ['orchestrator', 'pup', 'operator'].includes(u))).toBe(true);
      expect(await inStores(['logs', 'nats'])).not.toMatch(/Permissions Violation|Authorization Violation/);

      // Postgres: the migration as the -app owner, the orchestrator as holt_orchestrator (its URL names
      // no user: PGUSER and PGPASSWORD from the role's basic-auth Secret); nothing refused.
      const pgLog = await inStores(['logs', 'postgres']);
      const pgUsers = new Set(
        [...pgLog.matchAll(/connection authorized: user=(\S+) database=app/g)].map((m) => m[1]),
      );
      expect(pgUsers.has('app')).toBe(true);
      expect(pgUsers.has('holt_orchestrator')).toBe(true);
      expect([...pgUsers].filter((u) => u !== 'app' && !u?.startsWith('holt_'))).toEqual([]);
      expect(pgLog).not.toMatch(/password authentication failed/);
      // The one refusal allowed: the orchestrator starting while the migration Job still runs finds the
      // schema not yet granted and tries to migrate itself (ensureSchema), then waits and retries.
      const lines = pgLog.split('\n');
      const refused = lines.flatMap((l, i) =>
        /ERROR: {2}permission denied/.test(l) ? [lines[i + 1]?.replace(/^.*STATEMENT: {2}/, '') ?? ''] : [],
      );
      for (const sql of refused)
        expect(sql).toMatch(/^(SELECT name FROM holt\.pgmigrations|CREATE SCHEMA IF NOT EXISTS "holt")/);
      // The pups' role, from a pup container's own environment (the demo's agents never touch the
      // inbox): it logs in as holt_pup, reads the inbox, and may not enqueue a grant.
      const [drafter] = await pods(`holt.io/instance=${EXT},holt.io/role=Drafter`);
      const probe = [
        "const pg = require('module').createRequire('/opt/holt/app/package.json')('pg');",
        'const c = new pg.Client({ connectionString: process.env.DATABASE_URL });',
        'c.connect()',
        "  .then(() => c.query('SELECT current_user AS u, count(*)::int AS n FROM holt.agent_inbox'))",
        '  .then((r) => { console.log(JSON.stringify(r.rows[0]));',
        '    return c.query("INSERT INTO holt.agent_inbox (instance) VALUES (\'x\')"); })',
        "  .then(() => console.log('INSERTED'), (e) => console.log('REFUSED ' + e.message))",
        '  .finally(() => c.end());',
      ].join('\n');
      const asPup = await kubectl([
        'exec',
        drafter?.metadata.name ?? 'none',
        '-c',
        'pup',
        '--',
        'node',
        '-e',
        probe,
      ]);
      expect(asPup).toContain('{"u":"holt_pup","n":0}');
      expect(asPup).toMatch(/REFUSED permission denied for table agent_inbox/);

      const job = await kubectl([
        'get',
        'jobs',
        '-l',
        `holt.io/instance=${EXT},app.kubernetes.io/component=migration`,
        '-o',
        'jsonpath={.items[*].spec.template.spec.containers[0].env[?(@.name=="HOLT_DATABASE_ROLES")].value}',
      ]);
      expect(job).toBe('holt_orchestrator,holt_pup,holt_operator');
      progress(`external: demo on external stores finished in ${Math.round((Date.now() - t0) / 1000)} s`);
      await cleanUp();
      // Everything went: the Holt's pods and the stores' namespace.
      await eventually(
        'the Holt ext and its pods gone, and the stores namespace',
        async () => {
          const left = await pods(`holt.io/instance=${EXT}`);
          const ns = await c.kubectlResult(['get', 'namespace', STORES_NS], { allowFail: true });
          return left.length === 0 && ns.code !== 0 ? true : undefined;
        },
        CLUSTER_WAIT,
      );
      cleaned = true;
    } finally {
      if (!cleaned) await cleanUp().catch(() => undefined);
      progress(`external: section took ${Math.round((Date.now() - t0) / 1000)} s (cleanup included)`);
    }
  }, 900_000);
}
