import { execFile } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Artefact } from '../src/blackboard/types.ts';
import { detectEngine, type Engine, engineRun, imageDigest } from '../src/local/engine.ts';
import { type InstanceState, isAlive } from '../src/local/instance.ts';
import { commitWorkspace } from './git-workspace.ts';

/**
 * A Holt v1.0 project as a Holt user has it: three agents whose tools live in their images (built
 * here, each with its scripts inside), run unchanged by `holt up` in containers of those images, with
 * the images' digests recorded as Holt records them. Then the same file with --no-containers on this
 * machine. Real engine, real stores, the real CLI.
 */
const run = promisify(execFile);
const ROOT = resolve(import.meta.dirname, '..');
const HOLT = join(ROOT, 'bin', 'holt');
const BASE = 'holt.local/debian:bookworm-slim';
const ROLES = ['Writer', 'Reviewer', 'Publisher'] as const;
const image = (role: string) => `holt-e2e-${role.toLowerCase()}:v1`;

let scratch: string;
let tools: string;
let ws: string;
let env: NodeJS.ProcessEnv;
let engine: Engine;

async function holt(args: string[], ok = true) {
  try {
    const r = await run(HOLT, args, { cwd: ws, env, maxBuffer: 20 << 20 });
    return { code: 0, stdout: r.stdout, stderr: r.stderr };
  } catch (e) {
    const x = e as { code: number; stdout: string; stderr: string };
    if (ok) throw new Error(`holt ${args.join(' ')} failed (${x.code}): ${x.stderr}${x.stdout}`);
    return { code: x.code, stdout: x.stdout, stderr: x.stderr };
  }
}

// The tools. Where they ran is in what they write: /etc/holt-image exists in the images only.
const SCRIPTS: Record<string, string> = {
  'bid.sh': `#!/bin/sh
# $1: the artefact type this agent takes; $2: its bid on it.
if grep -q "\\"type\\": *\\"$1\\""; then echo "$2"; else echo ignore; fi
`,
  'writer.sh': `#!/bin/sh
cat >/dev/null
where=$(cat /etc/holt-image 2>/dev/null || echo host)
echo "written in $where" > written-by-writer.txt
# In its image: what the container lets a tool do (never tried on this machine: root could write /).
if [ -f /etc/holt-image ]; then
  {
    grep -E '^(CapEff|NoNewPrivs):' /proc/self/status
    if touch /probe-root 2>/dev/null; then echo 'root: writable'; else echo 'root: read-only'; fi
    if touch /tmp/probe 2>/dev/null; then echo 'tmp: writable'; else echo 'tmp: read-only'; fi
    # cgroup v2, else v1.
    echo "pids.max: $(cat /sys/fs/cgroup/pids.max 2>/dev/null || cat /sys/fs/cgroup/pids/pids.max 2>&1)"
    echo "memory.max: $(cat /sys/fs/cgroup/memory.max 2>/dev/null || cat /sys/fs/cgroup/memory/memory.limit_in_bytes 2>&1)"
  } > confinement.txt
fi
printf '{"artefact_type":"Draft","artefact_payload":"draft written in %s","summary":"drafted"}\\n' "$where"
`,
  'reviewer.sh': `#!/bin/sh
cat >/dev/null
printf '{"artefact_type":"Review","artefact_payload":"{}","summary":"approved","structural_type":"Review"}\\n'
`,
  'publisher.sh': `#!/bin/sh
cat >/dev/null
where=$(cat /etc/holt-image 2>/dev/null || echo host)
if touch publisher-probe 2>/dev/null; then ws=writable; else ws=read-only; fi
printf '{"artefact_type":"Published","artefact_payload":"published in %s, workspace %s","summary":"published","structural_type":"Terminal"}\\n' "$where" "$ws"
`,
};

const holtYml = () => `# A Holt v1.0 project: every agent's tools are in its image.
version: "1.0"
agents:
  Writer:
    image: ${image('Writer')}
    command: ["${tools}/writer.sh"]
    bid_script: ["${tools}/bid.sh", "GoalDefined", "exclusive"]
    workspace: {mode: rw}
  Reviewer:
    image: ${image('Reviewer')}
    command: ["${tools}/reviewer.sh"]
    bid_script: ["${tools}/bid.sh", "Draft", "review"]
  Publisher:
    image: ${image('Publisher')}
    command: ["${tools}/publisher.sh"]
    bid_script: ["${tools}/bid.sh", "Draft", "exclusive"]
    workspace: {mode: ro}
`;

beforeAll(async () => {
  engine = (await detectEngine(process.env)) as Engine;
  if (!engine) throw new Error('no container engine answers: `make setup` starts one');
  scratch = mkdtempSync(join(process.env.HOLT_TEST_TMP ?? tmpdir(), 'images-'));
  // The tools sit at the same absolute path in the images and on this machine, so one file serves both.
  tools = join(scratch, 'tools');
  mkdirSync(tools);
  for (const [f, text] of Object.entries(SCRIPTS)) {
    writeFileSync(join(tools, f), text);
    chmodSync(join(tools, f), 0o755);
  }
  for (const role of ROLES) {
    writeFileSync(
      join(scratch, `${role}.Dockerfile`),
      `FROM ${BASE}\nCOPY tools/ ${tools}/\nRUN echo ${role}-image > /etc/holt-image\n`,
    );
    await engineRun(
      engine,
      ['build', '-q', '-f', join(scratch, `${role}.Dockerfile`), '-t', image(role), scratch],
      300_000,
    );
  }
  ws = join(scratch, 'ws');
  mkdirSync(ws);
  writeFileSync(join(ws, 'holt.yml'), holtYml());
  commitWorkspace(ws);
  env = { ...process.env, HOLT_HOME: join(scratch, 'home'), NO_COLOR: '1', DOCKER_BUILDKIT: '0' };
}, 600_000);

afterAll(async () => {
  await holt(['down', '--name', 'v1'], false).catch(() => undefined);
  await holt(['down', '--name', 'v1-host'], false).catch(() => undefined);
  await holt(['down', '--name', 'v1-orphan'], false).catch(() => undefined);
  if (engine) await engineRun(engine, ['rmi', '-f', ...ROLES.map(image)]).catch(() => undefined);
  if (scratch) rmSync(scratch, { recursive: true, force: true });
});

interface Event {
  event: string;
  data: Record<string, string>;
}

/** Forages one goal to its end; returns the workflow's artefacts and the events `--watch` saw. */
async function workflow(name: string): Promise<{ trail: Artefact[]; events: Event[] }> {
  const w = await holt([
    'forage',
    '--name',
    name,
    '--goal',
    'publish a draft',
    '--allow-dirty',
    '--watch',
    '-o',
    'jsonl',
    '--timeout',
    '120',
  ]);
  const events = w.stdout
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as Event);
  expect(events.at(-1)?.event).toBe('workflow_completed');
  const trail = (await holt(['hoard', '--name', name, '-o', 'jsonl'])).stdout
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as Artefact);
  return { trail, events };
}

const payloadOf = (trail: Artefact[], type: string) => trail.find((a) => a.type === type)?.payload;

function stateOf(name: string): InstanceState {
  return JSON.parse(
    readFileSync(join(env.HOLT_HOME!, 'instances', name, 'state.json'), 'utf8'),
  ) as InstanceState;
}

describe('a Holt v1.0 project with its tools in images', () => {
  it('runs unchanged under holt up, each agent in its image, digests recorded as Holt does', async () => {
    const up = await holt(['up', '--name', 'v1', '--timeout', '120']);
    expect(up.stdout).toContain("Instance 'v1' started successfully (3 agents ready)");
    const running = (
      await engineRun(engine, ['ps', '--filter', 'label=holt.instance=v1', '--format', '{{.Image}}'])
    )
      .trim()
      .split('\n')
      .sort();
    expect(running).toEqual(ROLES.map(image).sort());

    const { trail, events } = await workflow('v1');
    expect(trail.map((a) => [a.type, a.produced_by_role, a.structural_type])).toEqual([
      ['GoalDefined', 'user', 'Standard'],
      ['Draft', 'Writer', 'Standard'],
      ['Review', 'Reviewer', 'Review'],
      ['Published', 'Publisher', 'Terminal'],
    ]);
    expect(payloadOf(trail, 'Draft')).toBe('draft written in Writer-image');
    expect(payloadOf(trail, 'Review')).toBe('{}');
    expect(payloadOf(trail, 'Published')).toBe('published in Publisher-image, workspace read-only');
    // The read-write agent wrote the workspace itself (as this user: no root-owned files left here).
    expect(readFileSync(join(ws, 'written-by-writer.txt'), 'utf8')).toBe('written in Writer-image\n');
    // Confined as the agent container of a pod: no capability, no privilege to gain, a read-only root
    // with a writable /tmp, and the default process and memory limits (4096, 4g).
    expect(readFileSync(join(ws, 'confinement.txt'), 'utf8')).toBe(
      [
        'CapEff:\t0000000000000000',
        'NoNewPrivs:\t1',
        'root: read-only',
        'tmp: writable',
        'pids.max: 4096',
        `memory.max: ${4 * 1024 ** 3}`,
        '',
      ].join('\n'),
    );

    // Holt's audit: agent_images (role → digest) and the grants carry the same digest.
    const s = stateOf('v1');
    const redis = new Redis(s.redisUrl!, { lazyConnect: true });
    await redis.connect();
    try {
      const digests = Object.fromEntries(
        await Promise.all(ROLES.map(async (r) => [r, await imageDigest(engine, image(r))] as const)),
      );
      expect(await redis.hgetall('holt:v1:agent_images')).toEqual(digests);
      const grants = events.filter((e) => e.event === 'claim_granted');
      expect(grants.map((g) => g.data.agent_name).sort()).toEqual(['Publisher', 'Reviewer', 'Writer']);
      for (const g of grants) expect(g.data.agent_image_id).toBe(digests[g.data.agent_name as string]);
      // On the claims too (Holt's granted_agent_image_id): the image of the agent last granted.
      for (const [type, last] of [
        ['GoalDefined', 'Writer'],
        ['Draft', 'Publisher'],
      ] as const) {
        const target = trail.find((a) => a.type === type)!;
        const claimId = await redis.get(`holt:v1:claim_by_artefact:${target.id}`);
        const claim = await redis.hgetall(`holt:v1:claim:${claimId}`);
        expect(claim.last_grant_agent).toBe(last);
        expect(claim.granted_agent_image_id).toBe(digests[last]);
      }
    } finally {
      redis.disconnect();
    }
    const pids = [s.supervisorPid, ...s.components.map((c) => c.pid)].filter(Boolean) as number[];
    await holt(['down', '--name', 'v1']);
    expect(pids.filter((p) => isAlive(p))).toEqual([]);
    // Its containers and network went with it.
    expect((await engineRun(engine, ['ps', '-aq', '--filter', 'label=holt.instance=v1'])).trim()).toBe('');
    expect((await engineRun(engine, ['network', 'ls', '-q', '--filter', 'name=^holt-v1$'])).trim()).toBe('');
  }, 600_000);

  it('the same file with --no-containers runs on this machine, the ro workspace still read-only', async () => {
    rmSync(join(ws, 'written-by-writer.txt'), { force: true });
    await holt(['up', '--name', 'v1-host', '--no-containers', '--timeout', '120']);
    try {
      expect((await engineRun(engine, ['ps', '-q', '--filter', 'label=holt.instance=v1-host'])).trim()).toBe(
        '',
      );
      const { trail } = await workflow('v1-host');
      expect(trail.at(-1)?.structural_type).toBe('Terminal');
      expect(payloadOf(trail, 'Draft')).toBe('draft written in host');
      expect(payloadOf(trail, 'Published')).toBe('published in host, workspace read-only');
    } finally {
      await holt(['down', '--name', 'v1-host']);
    }
  }, 600_000);

  it('a supervisor killed outright: holt down still removes its containers and network', async () => {
    await holt(['up', '--name', 'v1-orphan', '--timeout', '120']);
    const s = stateOf('v1-orphan');
    process.kill(s.supervisorPid, 'SIGKILL');
    const left = () => engineRun(engine, ['ps', '-aq', '--filter', 'label=holt.instance=v1-orphan']);
    expect((await left()).trim().split('\n')).toHaveLength(3);
    await holt(['down', '--name', 'v1-orphan']);
    expect((await left()).trim()).toBe('');
    expect(
      (await engineRun(engine, ['network', 'ls', '-q', '--filter', 'name=^holt-v1-orphan$'])).trim(),
    ).toBe('');
  }, 300_000);

  it('without an engine, holt up names the agents that need one and refuses', async () => {
    const r = await run(HOLT, ['up', '--name', 'v1-none', '--timeout', '30'], {
      cwd: ws,
      env: { ...env, HOLT_CONTAINER_ENGINE: join(scratch, 'no-such-engine') },
    }).then(
      () => ({ code: 0, stderr: '' }),
      (e: { code: number; stderr: string }) => e,
    );
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain('Writer, Reviewer, Publisher run in their images and need Docker or Podman');
    expect(r.stderr).toContain('--no-containers');
  }, 120_000);
});
