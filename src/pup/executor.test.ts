import { execFileSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type RedisServer, startRedis } from '../../test/harness/redis.ts';
import { makeTempDir, removeDir } from '../../test/harness/tmp.ts';
import { Blackboard, PayloadTooLargeError } from '../blackboard/client.ts';
import { executionLeaseKey } from '../blackboard/execution-lease.ts';
import { outputId } from '../blackboard/grants.ts';
import type { Claim, ClaimType } from '../blackboard/types.ts';
import { silentLogger } from '../common/logger.ts';
import { CommandExecutor } from './command-executor.ts';
import { PupMetrics } from './metrics.ts';
import { questionId } from './questions.ts';
import { artefact, config, grantedClaim, node, sh } from './testkit.ts';

let redis: RedisServer;
let bb: Blackboard;
let ws: string;
beforeAll(async () => {
  redis = await startRedis();
  bb = Blackboard.connect(redis.url, 'test');
  ws = makeTempDir('ws');
  execFileSync('git', ['init', '-q', ws]);
});
afterAll(async () => {
  await bb?.close();
  await redis?.stop();
  removeDir(ws);
});

function executor(command: string[], over: Record<string, string> = {}, board: Blackboard = bb) {
  const cfg = config({
    REDIS_URL: redis.url,
    HOLT_WORKSPACE: ws,
    HOLT_AGENT_COMMAND: JSON.stringify(command),
    ...over,
  });
  const metrics = new PupMetrics({ instance: 'test', role: cfg.role, mode: cfg.mode });
  return { ex: new CommandExecutor({ bb: board, cfg, log: quiet, metrics, owner: 'me' }), metrics };
}

const quiet = silentLogger();

async function output(c: Claim, type: ClaimType = 'exclusive') {
  const a = await bb.getArtefact(outputId('test', c.id, 'coder', type));
  if (!a) throw new Error('no output artefact');
  return a;
}

const exclusive = { status: 'pending_exclusive', granted_exclusive_agent: 'coder' } as const;

describe('tool contract', () => {
  it('round trip: stdin carries the real claim type, target and ordered context; cwd is the workspace', async () => {
    const goal = artefact();
    const spec = artefact({ type: 'DesignSpec', source_artefacts: [goal.id], produced_by_role: 'architect' });
    await bb.createArtefact(goal);
    const { claim } = await grantedClaim(
      bb,
      { status: 'pending_parallel', granted_parallel_agents: ['coder'] },
      spec,
    );
    const { ex, metrics } = executor(node('echo.mjs'));
    expect(await ex.execute({ claimId: claim.id, claimType: 'claim' })).toBe('success');
    const out = await output(claim, 'claim');
    expect(out).toMatchObject({
      structural_type: 'Standard',
      type: 'EchoResult',
      version: 1,
      logical_id: out.id,
      source_artefacts: [spec.id],
      produced_by_role: 'coder',
    });
    expect(JSON.parse(out.payload)).toEqual({
      claim_type: 'claim',
      target: spec.id,
      context: [goal.id],
      cwd: ws,
    });
    // the output is thread-tracked
    expect(await bb.latestInThreads([out.logical_id])).toEqual(
      new Map([[out.logical_id, { id: out.id, version: 1 }]]),
    );
    expect(await metrics.registry.getSingleMetricAsString('holt_pup_tool_runs_total')).toMatch(
      /outcome="success"[^\n]* 1/,
    );
  });

  it('reviewer: approval {} and rejection become Review artefacts', async () => {
    const { ex } = executor(node('reviewer.mjs'));
    for (const [payload, expected] of [
      ['fine', '{}'],
      ['please reject', '{"issue":"needs tests"}'],
    ]) {
      const { claim } = await grantedClaim(
        bb,
        { status: 'pending_review', granted_review_agents: ['coder'] },
        artefact({ payload }),
      );
      expect(await ex.execute({ claimId: claim.id, claimType: 'review' })).toBe('success');
      expect(await output(claim, 'review')).toMatchObject({
        structural_type: 'Review',
        type: 'Review',
        payload: expected,
      });
    }
  });

  it('a feedback claim yields a rework (same thread, v+1, target type) and artefact_reworked', async () => {
    const v1 = artefact({ type: 'RecipeYAML', produced_by_role: 'coder' });
    const review = artefact({
      structural_type: 'Review',
      type: 'Review',
      payload: 'no',
      source_artefacts: [v1.id],
    });
    await bb.createArtefact(review);
    const sub = new Redis(redis.url);
    const events: string[] = [];
    sub.on('message', (_c, m) => events.push(m));
    await sub.subscribe('holt:test:workflow_events');
    const { claim } = await grantedClaim(
      bb,
      { ...exclusive, status: 'pending_assignment', additional_context_ids: [review.id] },
      v1,
    );
    const { ex } = executor(node('echo.mjs'));
    expect(await ex.execute({ claimId: claim.id, claimType: 'exclusive' })).toBe('success');
    const v2 = await output(claim);
    expect(v2).toMatchObject({
      logical_id: v1.logical_id,
      version: 2,
      type: 'RecipeYAML',
      source_artefacts: [v1.id, review.id],
    });
    // feedback reaches the tool inside context_chain (with v1 itself, through the review's sources)
    expect(JSON.parse(v2.payload).context).toEqual([v1.id, review.id]);
    expect((await bb.latestInThreads([v1.logical_id])).get(v1.logical_id)).toEqual({ id: v2.id, version: 2 });
    await bb.redis.ping(); // let the subscriber drain
    await sub.ping();
    expect(events.map((e) => JSON.parse(e))).toContainEqual({
      event: 'artefact_reworked',
      data: {
        new_artefact_id: v2.id,
        logical_id: v1.logical_id,
        new_version: 2,
        previous_version_id: v1.id,
        artefact_type: 'RecipeYAML',
        produced_by_role: 'coder',
      },
    });
    sub.disconnect();
  });

  it('a Question parks the grant until its Answer exists; the tool then runs again with the Answer in context', async () => {
    const runs = join(makeTempDir('runs'), 'runs');
    const { ex } = executor(node('echo.mjs', 'ask'), {
      ECHO_RUNS_FILE: runs,
      HOLT_TOOL_ENV: '["ECHO_RUNS_FILE"]',
    });
    const q = await grantedClaim(bb, exclusive);
    const grant = { claimId: q.claim.id, claimType: 'exclusive' } as const;
    const reports: unknown[] = [];
    expect(await ex.execute(grant, undefined, { report: (r) => reports.push(r) })).toBe('waiting');
    const oid = outputId('test', q.claim.id, 'coder', 'exclusive');
    const qid = questionId(oid, 0);
    expect(reports).toEqual([{ waitingOn: qid }]);
    // Not at the output id: the grant stays open (the orchestrator never takes a Question as output).
    expect(await bb.getArtefact(oid)).toBeNull();
    expect(await bb.getArtefact(qid)).toMatchObject({
      structural_type: 'Question',
      payload: 'Is GoalDefined in scope?',
      source_artefacts: [q.target.id],
      produced_by_role: 'coder',
    });
    // A re-scan before the Answer: still waiting, and the tool does not run again.
    expect(await ex.execute(grant)).toBe('waiting');
    expect(readFileSync(runs, 'utf8').trim().split('\n')).toHaveLength(1);
    await bb.createArtefact(
      artefact({
        structural_type: 'Answer',
        type: 'Answer',
        payload: 'yes, in scope',
        source_artefacts: [qid],
      }),
    );
    expect(await ex.execute(grant)).toBe('success');
    expect(await output(q.claim)).toMatchObject({ type: 'Decision', payload: 'yes, in scope' });
    expect(readFileSync(runs, 'utf8').trim().split('\n')).toHaveLength(2);
  });

  it('checked CodeCommits', async () => {
    const good = await grantedClaim(bb, exclusive);
    await executor(node('echo.mjs', 'commit')).ex.execute({ claimId: good.claim.id, claimType: 'exclusive' });
    const commit = await output(good.claim);
    expect(commit.type).toBe('CodeCommit');
    expect(execFileSync('git', ['rev-parse', 'HEAD'], { cwd: ws, encoding: 'utf8' }).trim()).toBe(
      commit.payload,
    );

    const bad = await grantedClaim(bb, exclusive);
    expect(
      await executor(node('echo.mjs', 'bad-commit')).ex.execute({
        claimId: bad.claim.id,
        claimType: 'exclusive',
      }),
    ).toBe('failure');
    const f = await output(bad.claim);
    expect(f).toMatchObject({ structural_type: 'Failure', type: 'ToolExecutionFailure' });
    expect(JSON.parse(f.payload).reason).toMatch(
      /^Tool succeeded but artefact creation failed: git commit validation failed/,
    );
  });
});

describe('a hostile workspace: the CodeCommit check runs nothing a tool planted in .git', () => {
  // git-plant.mjs plants core.fsmonitor, a partial clone's uploadpack, a filter and hooks, each dumping
  // its environment (the pup's holds REDIS_URL) to .git/holt-plant-dump; git-plant's control is in git.test.ts.
  for (const [mode, outcome, reason] of [
    ['name', 'failure', /git commit validation failed for ":README": not a full commit id/],
    ['missing', 'failure', /git commit validation failed for "1{40}"/],
    ['head', 'success', undefined],
  ] as const) {
    it(`returns ${mode === 'name' ? '":README"' : `a ${mode} full id`}: ${outcome}, and the plant never ran`, async () => {
      const pws = makeTempDir(`plant-${mode}`);
      try {
        const c = await grantedClaim(bb, exclusive);
        const { ex } = executor(node('git-plant.mjs', mode), { HOLT_WORKSPACE: pws });
        expect(await ex.execute({ claimId: c.claim.id, claimType: 'exclusive' })).toBe(outcome);
        const out = await output(c.claim);
        if (reason) {
          expect(out).toMatchObject({ structural_type: 'Failure', type: 'ToolExecutionFailure' });
          expect(JSON.parse(out.payload).reason).toMatch(reason);
        } else
          expect(out).toMatchObject({ type: 'CodeCommit', payload: expect.stringMatching(/^[0-9a-f]{40}$/) });
        expect(existsSync(join(pws, '.git', 'plant.sh'))).toBe(true);
        expect(existsSync(join(pws, '.git', 'holt-plant-dump'))).toBe(false);
      } finally {
        removeDir(pws);
      }
    });
  }
});

describe('every tool failure becomes a ToolExecutionFailure', () => {
  const cases: [string, string[], Record<string, string>, RegExp, number | undefined][] = [
    ['exits 3', sh('exit3.sh'), {}, /^process exited with code 3$/, 3],
    ['prints garbage', sh('garbage.sh', 'text'), {}, /^Failed to parse tool output: invalid JSON/, undefined],
    [
      'prints two objects',
      sh('garbage.sh', 'two'),
      {},
      /^Failed to parse tool output: invalid JSON/,
      undefined,
    ],
    ['prints nothing', sh('garbage.sh', 'empty'), {}, /^tool produced no output on stdout$/, undefined],
    ['wrong shape', sh('garbage.sh', 'schema'), {}, /does not match the tool contract/, undefined],
    [
      'times out',
      sh('slow.sh', '30'),
      { HOLT_TOOL_TIMEOUT_MS: '300' },
      /^tool execution timeout \(300 ms\)$/,
      -1,
    ],
    ['writes 20 MB', sh('flood.sh'), {}, /^tool output exceeded the 10485760 byte limit$/, -1],
    ['cannot start', ['/nonexistent/tool'], {}, /^failed to start tool: .*ENOENT/, -1],
  ];
  it.each(cases)('%s', async (_name, cmd, env, reason, code) => {
    const { claim, target } = await grantedClaim(bb, exclusive);
    const { ex, metrics } = executor(cmd, env);
    expect(await ex.execute({ claimId: claim.id, claimType: 'exclusive' })).toBe('failure');
    const f = await output(claim);
    expect(f).toMatchObject({
      structural_type: 'Failure',
      type: 'ToolExecutionFailure',
      source_artefacts: [target.id],
      produced_by_role: 'coder',
    });
    const body = JSON.parse(f.payload);
    expect(body.reason).toMatch(reason);
    expect(body.error).toBe(body.reason);
    expect(body.exit_code).toBe(code);
    // Absent when empty, as Holt's omitempty leaves it out.
    expect(body.stdout === undefined || (body.stdout.length > 0 && body.stdout.length <= 5003)).toBe(true);
    if (_name === 'exits 3')
      expect(body).toMatchObject({ stdout: 'partial output\n', stderr: 'something went wrong\n' });
    expect(await metrics.registry.getSingleMetricAsString('holt_pup_tool_runs_total')).toMatch(
      /outcome="failure"[^\n]* 1/,
    );
    // Every one of these is the tool's own failure (src/blackboard/error-class.ts), and counted as such.
    expect(body.error_class).toBe('tool');
    expect(await metrics.registry.getSingleMetricAsString('holt_pup_failures_total')).toMatch(
      /class="tool"[^\n]* 1/,
    );
  });

  it('a missing target or workspace is a failure too, with exit code -1', async () => {
    const c = await grantedClaim(bb, exclusive);
    await bb.redis.del(`holt:test:artefact:${c.target.id}`);
    expect(await executor(node('echo.mjs')).ex.execute({ claimId: c.claim.id, claimType: 'exclusive' })).toBe(
      'failure',
    );
    expect(JSON.parse((await output(c.claim)).payload)).toMatchObject({
      exit_code: -1,
      reason: expect.stringMatching(/^target artefact .* not found$/),
      error_class: 'transient',
    });
    const d = await grantedClaim(bb, exclusive);
    const noWs = executor(node('echo.mjs'), { HOLT_WORKSPACE: join(ws, 'missing') }).ex;
    expect(await noWs.execute({ claimId: d.claim.id, claimType: 'exclusive' })).toBe('failure');
    expect(JSON.parse((await output(d.claim)).payload)).toMatchObject({
      reason: expect.stringMatching(/^workspace .* does not exist$/),
      error_class: 'config',
    });
  });
});

describe('payload cap', () => {
  it('a result over the cap becomes a Failure naming the size and the cap; the store refuses it too', async () => {
    const small = new Blackboard(bb.redis, 'test', { maxPayloadBytes: 1000 });
    const c = await grantedClaim(bb, exclusive);
    const tool = [
      'sh',
      '-c',
      `printf '{"artefact_type":"Big","summary":"s","artefact_payload":"%s"}' "$(head -c 3000 /dev/zero | tr '\\0' a)"`,
    ];
    expect(await executor(tool, {}, small).ex.execute({ claimId: c.claim.id, claimType: 'exclusive' })).toBe(
      'failure',
    );
    const out = await output(c.claim);
    expect(out.structural_type).toBe('Failure');
    // The Failure fits the cap itself: its copy of the tool's output is cut to fit.
    expect(Buffer.byteLength(out.payload)).toBeLessThanOrEqual(1000);
    expect(JSON.parse(out.payload).reason).toBe(
      'Tool succeeded but its result was refused: payload of 3000 bytes exceeds the cap of 1000 bytes (HOLT_MAX_PAYLOAD_BYTES)',
    );
    // Any writer: the blackboard itself refuses an artefact over its cap, and takes one at it.
    const a = {
      logical_id: randomUUID(),
      version: 1,
      structural_type: 'Standard' as const,
      type: 'T',
      source_artefacts: [] as string[],
      produced_by_role: 'x',
    };
    await expect(small.createArtefact({ ...a, id: randomUUID(), payload: 'é'.repeat(501) })).rejects.toThrow(
      PayloadTooLargeError,
    );
    expect((await small.createArtefact({ ...a, id: randomUUID(), payload: 'é'.repeat(500) })).created).toBe(
      true,
    );
  });
});

describe('a grant runs once', () => {
  it('a second execution of the same grant (duplicate announcement, re-scan) writes nothing and runs no tool', async () => {
    const runs = join(ws, 'runs.txt');
    const { claim } = await grantedClaim(bb, exclusive);
    // The tool sees only declared variables (HOLT_TOOL_ENV), so the counter file is declared.
    const { ex } = executor(node('echo.mjs'), {
      ECHO_RUNS_FILE: runs,
      HOLT_TOOL_ENV: JSON.stringify(['ECHO_RUNS_FILE']),
    });
    const both = await Promise.all([
      ex.execute({ claimId: claim.id, claimType: 'exclusive' }),
      ex.execute({ claimId: claim.id, claimType: 'exclusive' }),
    ]);
    expect(both.sort()).toEqual(['leased_elsewhere', 'success']);
    expect(await ex.execute({ claimId: claim.id, claimType: 'exclusive' })).toBe('already_done');
    expect(readFileSync(runs, 'utf8').trim().split('\n')).toHaveLength(1);
  });

  it('the execution lease is short and renewed while the tool runs: a run longer than the lease keeps it', async () => {
    const { claim } = await grantedClaim(bb, exclusive);
    const grant = { claimId: claim.id, claimType: 'exclusive' } as const;
    const tool = [
      'sh',
      '-c',
      'cat >/dev/null; sleep 1.2; echo \'{"artefact_type":"Slow","artefact_payload":"x","summary":"s"}\'',
    ];
    const first = executor(tool, { HOLT_EXECUTION_LEASE_MS: '300' }).ex;
    const second = executor(tool, { HOLT_EXECUTION_LEASE_MS: '300' }).ex;
    const running = first.execute(grant);
    // Well past the 300 ms lease: without renewal a second pup would take the grant now.
    await new Promise((r) => setTimeout(r, 800));
    expect(await second.execute(grant)).toBe('leased_elsewhere');
    expect(await running).toBe('success');
    expect(
      await bb.redis.exists(executionLeaseKey(bb, outputId('test', claim.id, 'coder', 'exclusive'))),
    ).toBe(0);
  });

  it('refuses a grant the claim does not give this role', async () => {
    const { claim } = await grantedClaim(bb, { ...exclusive, granted_exclusive_agent: 'other' });
    const { ex } = executor(node('echo.mjs'));
    expect(await ex.execute({ claimId: claim.id, claimType: 'exclusive' })).toBe('not_granted');
    expect(await ex.execute({ claimId: claim.id, claimType: 'review' })).toBe('not_granted');
  });
});

describe('secrets never reach a tool or a Failure artefact', () => {
  it("the tool's environment lacks the pup's credentials, and echoed credentials are cut from the payload", async () => {
    const goal = artefact();
    await bb.createArtefact(goal);
    const { claim } = await grantedClaim(bb, exclusive, goal);
    // Prints what it can see of the credentials, then the literal secret values, then fails.
    const script =
      'echo "db=[$DATABASE_URL] key=[$HOLT_LLM_API_KEY]"; echo "leak db-pass-9f8e7d sk-test-key-123456" >&2; exit 3';
    const { ex } = executor(['sh', '-c', script], {
      DATABASE_URL: 'postgres://holt:db-pass-9f8e7d@127.0.0.1:5432/holt',
      HOLT_LLM_API_KEY: 'sk-test-key-123456',
    });
    expect(await ex.execute({ claimId: claim.id, claimType: 'exclusive' })).toBe('failure');
    const out = await output(claim);
    expect(out.type).toBe('ToolExecutionFailure');
    const payload = JSON.parse(out.payload) as { stdout: string; stderr: string; exit_code: number };
    expect(payload.exit_code).toBe(3);
    expect(payload.stdout).toContain('db=[] key=[]');
    expect(payload.stderr).toContain('leak [redacted] [redacted]');
    expect(out.payload).not.toContain('db-pass-9f8e7d');
    expect(out.payload).not.toContain('sk-test-key-123456');
  });

  it("a successful tool's result is scrubbed too: its output is untrusted and may quote a credential", async () => {
    const goal = artefact();
    await bb.createArtefact(goal);
    const { claim } = await grantedClaim(bb, exclusive, goal);
    const result = JSON.stringify({
      artefact_type: 'Echo',
      artefact_payload: 'found db-pass-4c3b2a in a file',
      summary: 'ok',
    });
    const { ex } = executor(['sh', '-c', `printf '%s' '${result}'`], {
      DATABASE_URL: 'postgres://holt:db-pass-4c3b2a@127.0.0.1:5432/holt',
    });
    expect(await ex.execute({ claimId: claim.id, claimType: 'exclusive' })).toBe('success');
    const out = await output(claim);
    expect(out.type).toBe('Echo');
    expect(out.payload).toBe('found [redacted] in a file');
  });
});
