import { describe, expect, it } from 'vitest';
import { currentGrant, isGranted, outputId } from '../blackboard/grants.ts';
import { failurePayload, resultArtefact } from '../blackboard/results.ts';
import { ConfigError } from '../common/config.ts';
import { detectMode, loadConfig } from './config.ts';
import { orderContext } from './context.ts';
import { biddingOpen, chooseBid } from './decide.ts';
import { GrantQueue } from './grant-queue.ts';
import { evaluateRun, parseToolStdout, type ToolRun } from './result.ts';
import { artefact, claim, pupEnv } from './testkit.ts';

const run = (over: Partial<ToolRun>): ToolRun => ({
  exitCode: 0,
  signal: null,
  stdout: '',
  stderr: '',
  timedOut: false,
  overflow: false,
  durationMs: 1,
  ...over,
});
const limits = { timeoutMs: 300_000, outputLimitBytes: 10 };

describe('configuration', () => {
  it('reads Holt variables and our defaults', () => {
    const c = loadConfig([], pupEnv({ HOLT_HEALTH_PORT: '' }));
    expect(c.healthPort).toBe(8080);
    expect(c).toMatchObject({
      mode: 'standard',
      role: 'coder',
      workspace: '/workspace',
      toolTimeoutMs: 300_000,
    });
    expect(c.outputLimitBytes).toBe(10 * 1024 * 1024);
    expect(c.redisRetries).toBe(3);
  });

  it.each([
    [{ HOLT_AGENT_COMMAND: 'run.sh' }, /^HOLT_AGENT_COMMAND: must be a JSON array/],
    [{ HOLT_AGENT_COMMAND: '[]' }, /^HOLT_AGENT_COMMAND: must be a non-empty/],
    [{ HOLT_BIDDING_STRATEGY: 'maybe' }, /^HOLT_BIDDING_STRATEGY: must be one of/],
    [{ HOLT_BIDDING_STRATEGY: '' }, /^HOLT_BIDDING_STRATEGY: is required unless HOLT_AGENT_BID_SCRIPT/],
    [{ HOLT_INSTANCE_NAME: '' }, /^HOLT_INSTANCE_NAME: is required/],
    [{ REDIS_URL: 'localhost:6379' }, /^REDIS_URL: must be a redis/],
    [{ HOLT_TOOL_TIMEOUT_MS: 'soon' }, /^HOLT_TOOL_TIMEOUT_MS: /],
    [{ HOLT_HEALTH_CHECK_COMMAND: '{"a":1}' }, /^HOLT_HEALTH_CHECK_COMMAND: /],
    [{ HOLT_MODE: 'boss' }, /^HOLT_MODE: must be standard, controller or worker/],
  ])('a bad value is one line naming the variable: %j', (over, msg) => {
    let err: unknown;
    try {
      loadConfig([], pupEnv(over as Record<string, string>));
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as Error).message).toMatch(msg);
    expect((err as Error).message).not.toContain('\n');
  });

  it('detects the mode (docs/agent-worker.md § Modes): --execute-claim, then controller, else standard', () => {
    expect(detectMode('x', 'controller')).toBe('worker');
    expect(detectMode(undefined, 'controller')).toBe('controller');
    expect(detectMode(undefined, undefined)).toBe('standard');
    // HOLT_MODE=worker alone: the inbox-driven worker (src/pup/inbox-worker.ts)
    expect(detectMode(undefined, 'worker')).toBe('worker');
    const id = '0b7e8b5e-4f39-4a57-9b43-3a0e6f1d2c11';
    expect(loadConfig(['--execute-claim', id], pupEnv({ HOLT_BIDDING_STRATEGY: '' }))).toMatchObject({
      mode: 'worker',
      executeClaim: id,
    });
    expect(() => loadConfig(['--execute-claim'], pupEnv({}))).toThrow(/^--execute-claim: needs a claim id/);
    // a controller never runs the tool, so it needs no command (Holt's controllers carry a dummy one)
    expect(loadConfig([], pupEnv({ HOLT_MODE: 'controller', HOLT_AGENT_COMMAND: '' })).mode).toBe(
      'controller',
    );
  });
});

describe('bids and grants', () => {
  it('bid: script word, else strategy, else ignore', () => {
    expect(chooseBid({ ok: true, stdout: ' review\n' }, 'claim')).toEqual({
      bid: 'review',
      source: 'script',
    });
    expect(chooseBid({ ok: true, stdout: 'perhaps' }, 'claim')).toMatchObject({
      bid: 'claim',
      source: 'strategy',
    });
    expect(chooseBid({ ok: false, reason: 'exit 1' }, undefined)).toEqual({
      bid: 'ignore',
      source: 'default',
      fallbackReason: 'exit 1',
    });
    expect(chooseBid(undefined, 'exclusive')).toEqual({ bid: 'exclusive', source: 'strategy' });
  });

  it('grants: the role must be in the list of the grant type, on an open claim', () => {
    const c = claim(artefact().id, {
      status: 'pending_parallel',
      granted_review_agents: ['coder'],
      granted_parallel_agents: ['coder', 'tester'],
    });
    expect(isGranted(c, 'coder', 'review')).toBe(true);
    expect(isGranted(c, 'coder', 'exclusive')).toBe(false);
    expect(isGranted({ ...c, status: 'complete' }, 'coder', 'claim')).toBe(false);
    // the re-scan only takes the current phase's grant
    expect(currentGrant(c, 'coder')).toBe('claim');
    expect(
      currentGrant({ ...c, status: 'pending_assignment', granted_exclusive_agent: 'coder' }, 'coder'),
    ).toBe('exclusive');
    expect(currentGrant({ ...c, status: 'terminated' }, 'coder')).toBeNull();
    expect(biddingOpen(claim(artefact().id))).toBe(true);
    expect(biddingOpen(c)).toBe(false);
    expect(biddingOpen(claim(artefact().id, { status: 'pending_assignment' }))).toBe(false);
  });

  it('an output id is a function of (instance, claim, role, claim type)', () => {
    const a = outputId('i', 'c', 'coder', 'review');
    expect(outputId('i', 'c', 'coder', 'review')).toBe(a);
    expect(
      new Set([a, outputId('i', 'c', 'coder', 'claim'), outputId('j', 'c', 'coder', 'review')]).size,
    ).toBe(3);
  });

  it('the grant queue keeps grants in order up to its bound, never blocks the offerer, and says when it has room', async () => {
    const q = new GrantQueue<number>(2);
    expect(q.offer(1)).toBe(true);
    expect(q.offer(2)).toBe(true);
    expect(q.full).toBe(true);
    expect(q.offer(3)).toBe(false);
    let roomy = false;
    const room = q.room().then(() => {
      roomy = true;
    });
    await Promise.resolve();
    expect(roomy).toBe(false);
    expect(await q.take()).toBe(1);
    await room;
    expect(roomy).toBe(true);
    expect(await q.take()).toBe(2);
    const next = q.take();
    expect(q.offer(4)).toBe(true);
    expect(await next).toBe(4);
    q.offer(5);
    expect(q.close()).toEqual([5]);
    expect(await q.take()).toBeUndefined();
    expect(q.offer(6)).toBe(false);
    expect(() => new GrantQueue(0)).toThrow('capacity');
  });
});

describe('tool output', () => {
  it('maps structural types: explicit wins, Review auto-maps, else Standard; Question short form', () => {
    const p = (o: unknown) => parseToolStdout(JSON.stringify(o));
    expect(p({ artefact_type: 'Review', artefact_payload: '{}', summary: 's' })).toMatchObject({
      ok: true,
      result: { structural_type: 'Review', type: 'Review', payload: '{}' },
    });
    expect(p({ artefact_type: 'Done', summary: 's', structural_type: 'Terminal' })).toMatchObject({
      result: { structural_type: 'Terminal', payload: '' },
    });
    expect(p({ artefact_type: 'Code', artefact_payload: 'x', summary: 's' })).toMatchObject({
      result: { structural_type: 'Standard' },
    });
    expect(p({ structural_type: 'Question', payload: 'why?' })).toMatchObject({
      result: { structural_type: 'Question', type: 'Question', payload: 'why?' },
    });
  });

  it.each([
    [run({ spawnError: 'spawn x ENOENT' }), 'failed to start tool: spawn x ENOENT', -1],
    [run({ timedOut: true, exitCode: null, signal: 'SIGKILL' }), 'tool execution timeout (5 minutes)', -1],
    [run({ overflow: true, exitCode: null }), 'tool output exceeded the 10 byte limit', -1],
    [run({ exitCode: 3 }), 'process exited with code 3', 3],
    [run({ exitCode: null, signal: 'SIGSEGV' }), 'process killed by signal SIGSEGV', -1],
    [run({ stdout: '  \n' }), 'tool produced no output on stdout', 0],
    [run({ stdout: 'hello' }), /^Failed to parse tool output: invalid JSON: /, 0],
    [run({ stdout: '{}{}' }), /^Failed to parse tool output: invalid JSON: /, 0],
    [run({ stdout: '[1]' }), /^Failed to parse tool output: output does not match the tool contract/, 0],
    [run({ stdout: '{"artefact_type":"","summary":"s"}' }), /artefact_type: must not be empty/, 0],
  ])('failure shape %#', (r, reason, code) => {
    const ev = evaluateRun(r, limits);
    expect(ev.ok).toBe(false);
    if (ev.ok) return;
    expect(ev.failure.reason).toMatch(reason);
    expect(ev.failure.exit_code).toBe(code);
  });

  it("failure payload is Holt's: pretty JSON, exit_code omitted when 0, streams truncated at 5000", () => {
    const body = JSON.parse(
      failurePayload({ reason: 'r', exit_code: 0, stdout: 'x'.repeat(6000), stderr: 'e' }),
    );
    expect(Object.keys(body)).toEqual(['reason', 'stdout', 'stderr', 'error']);
    expect(body.stdout).toBe(`${'x'.repeat(5000)}...`);
    expect(body.error).toBe('r');
    expect(failurePayload({ reason: 'r', exit_code: 3, stdout: '', stderr: '' })).toContain(
      '\n  "exit_code": 3',
    );
  });

  it('derivative vs rework artefacts', () => {
    const target = artefact({ type: 'RecipeYAML', version: 2, logical_id: artefact().id });
    const spec = { structural_type: 'Standard' as const, type: 'Other', payload: 'p' };
    const d = resultArtefact('11111111-1111-4111-8111-111111111111', 'coder', claim(target.id), target, spec);
    expect(d).toMatchObject({ logical_id: d.id, version: 1, type: 'Other', source_artefacts: [target.id] });
    const review = artefact().id;
    const fb = claim(target.id, { status: 'pending_assignment', additional_context_ids: [review] });
    const r = resultArtefact('11111111-1111-4111-8111-111111111111', 'coder', fb, target, spec);
    expect(r).toMatchObject({
      logical_id: target.logical_id,
      version: 3,
      type: 'RecipeYAML',
      source_artefacts: [target.id, review],
    });
  });

  it('context order: kept types only, oldest first, ties in discovery order', () => {
    const a = artefact({ created_at_ms: 30 });
    const b = artefact({ created_at_ms: 10 });
    const c = artefact({ created_at_ms: 10, structural_type: 'Review' });
    const q = artefact({ created_at_ms: 1, structural_type: 'Question' });
    const out = orderContext([a, c, b, q].map((x, seq) => ({ a: x, seq })));
    expect(out.map((x) => x.id)).toEqual([c.id, b.id, a.id]);
  });
});
