import { createHmac } from 'node:crypto';
import { join } from 'node:path';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually } from '../../../test/harness/wait.ts';
import { newPasswords, PRINCIPALS } from '../../access/principals.ts';
import { HoltSpec } from '../../api/holt.ts';
import { toolReplySubject, toolRequestSubject } from '../../bus/subjects.ts';
import { newReplyId } from '../../bus/tools.ts';
import { findBinary } from '../../local/bins.ts';
import { freePort, retryOnPortClash } from '../../local/ports.ts';
import { type ServerProcess, spawnServer, waitReady } from '../../local/proc.ts';
import { makeTempDir, removeDir } from '../../local/tmp.ts';
import { bundledStore } from './bundled.ts';
import { NATS_MONITOR_PORT, passwordKey, STORE_PORTS } from './stores.ts';
import { toolSecret, toolSecretName } from './tool-secrets.ts';

type Env = { name: string; value?: string; valueFrom?: { secretKeyRef?: { name: string; key: string } } };
type Container = { command: string[]; env: Env[] };

const owner = { apiVersion: 'holt.io/v1alpha1', kind: 'Holt', name: 'demo', namespace: 'team', uid: 'u1' };
const TOOLS = ['deploy', 'lookup'];
const pw = newPasswords();
const container = (
  bundledStore(owner, 'nats', HoltSpec.parse({}).stores.nats, undefined, TOOLS)[0]!.spec as {
    template: { spec: { containers: Container[] } };
  }
).template.spec.containers[0]!;
/** Each tool's Secret as the operator makes it from the NATS Secret's `tool` password. */
const secrets = new Map(
  TOOLS.map((t) => [
    toolSecretName('demo', t),
    toolSecret(owner, t, pw.tool, false).stringData as Record<string, string>,
  ]),
);
/** The pod's environment as the kubelet would give it: the NATS Secret's keys and each tool Secret's. */
const podEnv = Object.fromEntries(
  container.env.map((e) => {
    const ref = e.valueFrom?.secretKeyRef;
    const tool = ref ? secrets.get(ref.name)?.[ref.key] : undefined;
    const who = ref?.name === 'demo-nats' ? PRINCIPALS.find((p) => passwordKey(p) === ref.key) : undefined;
    return [e.name, tool ?? (who ? pw[who] : (e.value ?? ''))];
  }),
);

let dir = '';
let port = 0;
let server: ServerProcess | undefined;
const open: NatsConnection[] = [];

// The bundled NATS's own start script (the StatefulSet's command), run here with a real server: only
// its paths and ports are moved into a scratch directory and onto loopback.
beforeAll(async () => {
  const bin = findBinary('nats-server', ['/usr/sbin', '/usr/bin', '/usr/local/bin']);
  dir = makeTempDir('bundled-nats');
  const conf = join(dir, 'nats.conf');
  server = await retryOnPortClash(async () => {
    port = await freePort();
    const monitor = await freePort();
    const script = container.command[2]!.replaceAll('/tmp/nats.conf', conf)
      .replace(`port: ${STORE_PORTS.nats}`, `port: ${port}\nhost: "127.0.0.1"`)
      .replace(`http_port: ${NATS_MONITOR_PORT}`, `http: "127.0.0.1:${monitor}"`)
      .replace('store_dir: "/data"', `store_dir: ${JSON.stringify(join(dir, 'js'))}`)
      .replace('exec nats-server', `exec ${bin}`);
    const proc = spawnServer({
      name: 'nats',
      command: 'sh',
      args: ['-c', script],
      dir,
      env: { ...process.env, ...podEnv },
    });
    await waitReady(proc, async () => (await fetch(`http://127.0.0.1:${monitor}/healthz`)).ok);
    return proc;
  });
});

afterAll(async () => {
  await Promise.all(open.map((c) => c.close().catch(() => undefined)));
  await server?.stop();
  if (dir) removeDir(dir);
});

const as = async (user: string, pass: string) => {
  const c = await connect({ servers: `127.0.0.1:${port}`, user, pass });
  open.push(c);
  return c;
};

/** The errors a NATS connection is told (permission violations come back this way). */
function watchErrors(c: NatsConnection): string[] {
  const errors: string[] = [];
  void (async () => {
    for await (const s of c.status())
      if (s.type === 'error') errors.push(String((s as { error?: unknown }).error));
  })();
  return errors;
}

describe('the bundled NATS (its start script on a real nats-server)', () => {
  it("a tool's Secret holds the HMAC of the tool password, and its user hears only that tool of the Holt's instance, answers once, publishes nothing", async () => {
    const lookup = secrets.get(toolSecretName('demo', 'lookup'))!;
    // The local mode's derivation (src/access/nats.ts toolUsers), computed here independently.
    expect(lookup.user).toBe('tool-lookup');
    expect(lookup.password).toBe(createHmac('sha256', pw.tool).update('tool:lookup').digest('hex'));
    expect(lookup.password).not.toBe(secrets.get(toolSecretName('demo', 'deploy'))!.password);
    expect(lookup.subject).toBe(toolRequestSubject('demo', 'lookup'));
    expect(lookup.url).toBe(`nats://tool-lookup:${lookup.password}@demo-nats.team.svc:4222`);

    const pup = await as('pup', pw.pup);
    const svc = await as(lookup.user!, lookup.password!);
    const errors = watchErrors(svc);
    const heard: string[] = [];
    const answers: string[] = [];
    pup.subscribe('evt.tool.>', {
      callback: (_e, m) => {
        if (m.headers?.code === 503) return; // "no responders" for the requests nobody may hear
        answers.push(`${m.subject.split('.')[4]}: ${m.string()}`);
      },
    });
    svc.subscribe(toolRequestSubject('demo', 'lookup'), {
      callback: (_e, m) => {
        heard.push(m.subject);
        m.respond('lookup answer');
      },
    });
    svc.subscribe(toolRequestSubject('demo', 'deploy')); // another tool of its instance: refused
    svc.subscribe(toolRequestSubject('other', 'lookup')); // its tool of another instance: refused
    svc.subscribe('cmd.tool.*.lookup'); // every instance's: refused
    await Promise.all([pup.flush(), svc.flush()]);
    const deployReply = toolReplySubject('demo', 'Writer', 'deploy', newReplyId());
    pup.publish(toolRequestSubject('demo', 'deploy'), '{}', { reply: deployReply });
    pup.publish(toolRequestSubject('other', 'lookup'), '{}', {
      reply: toolReplySubject('other', 'Writer', 'lookup', newReplyId()),
    });
    svc.publish(deployReply, 'forged deploy answer'); // a reply subject it was never given
    svc.publish(toolRequestSubject('demo', 'lookup'), '{}'); // a request of its own
    svc.publish('evt.agent.demo.step', '{}');
    await svc.flush();
    pup.publish(toolRequestSubject('demo', 'lookup'), '{}', {
      reply: toolReplySubject('demo', 'Writer', 'lookup', newReplyId()),
    });
    await eventually('the lookup answer', () => answers.length >= 1);
    await eventually('the refusals', () =>
      [
        `Permissions Violation for Subscription to "${toolRequestSubject('demo', 'deploy')}"`,
        `Permissions Violation for Subscription to "${toolRequestSubject('other', 'lookup')}"`,
        'Permissions Violation for Subscription to "cmd.tool.*.lookup"',
        `Permissions Violation for Publish to "${deployReply}"`,
        `Permissions Violation for Publish to "${toolRequestSubject('demo', 'lookup')}"`,
        'Permissions Violation for Publish to "evt.agent.demo.step"',
      ].every((e) => errors.join('\n').includes(e)),
    );
    // Its own request was refused, not heard: only the pup's.
    expect(heard).toEqual([toolRequestSubject('demo', 'lookup')]);
    expect(answers).toEqual(['lookup: lookup answer']);
  });

  it("a tool user's password is the Secret's only: another tool's, or the shared tool password, is refused", async () => {
    const deploy = secrets.get(toolSecretName('demo', 'deploy'))!;
    await expect(as('tool-lookup', deploy.password!)).rejects.toThrow(/Authorization/i);
    await expect(as('tool-lookup', pw.tool)).rejects.toThrow(/Authorization/i);
    // The shared `tool` user stays (the broad credential): it hears every instance's requests of a tool.
    const shared = await as('tool', pw.tool);
    const heard: string[] = [];
    shared.subscribe('cmd.tool.*.lookup', {
      callback: (_e, m) => {
        heard.push(m.subject);
      },
    });
    await shared.flush();
    const pup = await as('pup', pw.pup);
    pup.publish(toolRequestSubject('demo', 'lookup'), '{}');
    await eventually('the shared tool user hears the request', () => heard.length >= 1);
    expect(heard).toEqual([toolRequestSubject('demo', 'lookup')]);
  });
});
