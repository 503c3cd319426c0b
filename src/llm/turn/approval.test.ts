import { execFile, spawn } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { call, submit, text } from '../../../test/harness/llm.ts';
import { llmPupEnv, startPupRuntime } from '../../../test/harness/llm-runtime.ts';
import { makeTempDir, removeDir } from '../../../test/harness/tmp.ts';
import { eventually } from '../../../test/harness/wait.ts';
import { roleName } from '../../api/common.ts';
import { parseHoltFile } from '../../api/holtfile.ts';
import { pupEnvironment } from '../../api/pupenv.ts';
import { APPROVAL_TYPE } from '../../blackboard/approval.ts';
import type { Blackboard } from '../../blackboard/client.ts';
import type { Artefact } from '../../blackboard/types.ts';
import { lifeWakeSubject } from '../../bus/subjects.ts';
import { openQuestions } from '../../cli/board.ts';
import { labelsOf } from '../../life/labels.ts';
import { LifeStore } from '../../life/store.ts';
import { answeredQuestions } from '../../orchestrator/inbox.ts';
import { artefact } from '../../pup/testkit.ts';
import { loadLlmSettings } from '../config.ts';
import { llmKit } from '../llm.testkit.ts';
import { TINY } from '../mcp/mcp.testkit.ts';
import { verdictOf, visible } from './approval.ts';

// Approval of risky calls on real stores with the scripted model: the call waits on a Question, and
// only a person's Answer lets it run.

const node = process.execPath;
const HOLT = resolve(import.meta.dirname, '../../../bin/holt');
const KEY = 'sk-unit-test-key-000'; // the model's key: the pup's scrubber knows it
const { stores, setup, grantAndRun, lastTool, setups } = llmKit('llm-approval');

/** A tool that needs approval and leaves a mark in `file` each time it runs. */
const deploy = (file: string) => ({
  name: 'deploy',
  description: 'deploys',
  parameters: { type: 'object', properties: { target: { type: 'string' }, token: { type: 'string' } } },
  argv: [
    node,
    '-e',
    `require('fs').appendFileSync(${JSON.stringify(file)},'x');console.log('deployed',process.argv[1])`,
    '{{target}}',
  ],
  fixed: { region: 'eu-west-9' }, // hidden from the model, and so from the Question
  requireApproval: true,
});

const approvals = async (bb: Blackboard) =>
  (await bb.getArtefacts(await bb.listArtefactIds())).filter(
    (a): a is Artefact => a?.structural_type === 'Question' && a.type === APPROVAL_TYPE,
  );
const answer = (bb: Blackboard, q: Artefact, payload: string, role = 'user') =>
  bb.createArtefact(
    artefact({
      structural_type: 'Answer',
      type: 'Answer',
      payload,
      source_artefacts: [q.id],
      produced_by_role: role,
    }),
  );

async function asked(env: Record<string, string> = {}) {
  const file = `${stores.ws}/deploy-${setups() + 1}`;
  const args = { target: 'prod', token: `Bearer ${KEY}`, constructor: 'shown too' };
  const s = await setup([call('deploy', args), submit('finished')], {
    HOLT_LLM_TOOLS: JSON.stringify([deploy(file)]),
    ...env,
  });
  const r = await grantAndRun(s);
  expect(r.outcome).toBe('waiting');
  const [q] = await approvals(s.bb);
  expect(q).toBeDefined();
  return { s, r, q: q!, file };
}

describe('approval of risky calls', () => {
  it('the call waits on a Question naming the tool and its arguments (no secret); approve runs it once', async () => {
    const { s, r, q, file } = await asked();
    expect(q.payload).toContain('Approve a call to the tool deploy by agent coder?');
    expect(q.payload).toContain('"target": "prod"');
    expect(q.payload).toContain('"token": "Bearer [redacted]"');
    expect(q.payload).not.toContain(KEY);
    expect(q.payload).toContain('"constructor": "shown too"');
    expect(q.payload).not.toContain('eu-west-9');
    expect(q).toMatchObject({ produced_by_role: 'coder', source_artefacts: [r.claim.artefact_id] });
    expect(existsSync(file)).toBe(false); // not run before the answer
    expect(await s.rt.executor!.execute(r.grant)).toBe('waiting'); // still waiting: no new Question
    expect(await approvals(s.bb)).toHaveLength(1);
    expect(stores.llm.requests).toHaveLength(1);
    await answer(s.bb, q, 'Approve. Go ahead');
    expect(
      (await s.rt.decideBid(artefact({ structural_type: 'Answer', source_artefacts: [q.id] }))).bid,
    ).toBe('ignore');
    expect(await s.rt.executor!.execute(r.grant)).toBe('success');
    expect(readFileSync(file, 'utf8')).toBe('x');
    expect(lastTool(1)).toContain('deployed prod');
    expect(await s.rt.executor!.execute(r.grant)).not.toBe('success'); // done: nothing runs again
    expect(readFileSync(file, 'utf8')).toBe('x');
  });

  it('a rejection gives the model the refusal and the reason; the tool never ran', async () => {
    const { s, r, q, file } = await asked();
    await answer(s.bb, q, 'reject: not on a Friday');
    expect(await s.rt.executor!.execute(r.grant)).toBe('success');
    expect(lastTool(1)).toBe(
      "error: deploy was not run: a person's approval was required and the call was refused: not on a Friday",
    );
    expect(existsSync(file)).toBe(false);
    expect(r.out).toBeNull();
  });

  it('no answer by the deadline refuses the call; the Question stays open for people', async () => {
    const { s, r, q, file } = await asked({ HOLT_LLM_APPROVAL_TIMEOUT_MS: '1000' });
    await eventually(
      'the deadline to pass',
      async () => (await s.rt.executor!.execute(r.grant)) === 'success',
    );
    expect(lastTool(1)).toMatch(/was not run: .* refused: no answer within 1 s \(question [0-9a-f-]{36}\)$/);
    expect(existsSync(file)).toBe(false);
    expect((await openQuestions(s.bb)).map((x) => x.id)).toContain(q.id);
  });

  it('an Answer by an agent (the asking one included) approves nothing; a person’s then does', async () => {
    const { s, r, q, file } = await asked();
    await answer(s.bb, q, 'approve', 'coder'); // the asking agent's own role
    await answer(s.bb, q, 'yes', 'reviewer'); // another agent
    expect(await s.rt.executor!.execute(r.grant)).toBe('waiting');
    expect(existsSync(file)).toBe(false);
    expect(stores.llm.requests).toHaveLength(1);
    // For `holt questions` the approval is still open: no person has answered it.
    expect((await openQuestions(s.bb)).map((x) => x.id)).toContain(q.id);
    // Nor does the watchdog wake a worker's row parked on it (it would park again at every sweep).
    expect(await answeredQuestions(s.bb)([q.id])).toEqual([]);
    await answer(s.bb, q, 'yes');
    expect(await answeredQuestions(s.bb)([q.id])).toEqual([q.id]);
    expect(await s.rt.executor!.execute(r.grant)).toBe('success');
    expect(readFileSync(file, 'utf8')).toBe('x');
    expect((await openQuestions(s.bb)).map((x) => x.id)).not.toContain(q.id);
  });

  it('the model answering its own approval (an Answer as its result, on a claim of the Question) approves nothing', async () => {
    const { s, r, q, file } = await asked();
    stores.llm.reset([
      call('submit_result', {
        artefact_type: 'Answer',
        artefact_payload: 'approve',
        summary: 'approved it myself',
        structural_type: 'Answer',
      }),
    ]);
    const self = await grantAndRun(s, q); // the asking agent granted a claim on its own Question
    expect(self.outcome).toBe('success');
    expect(self.out).toMatchObject({
      structural_type: 'Answer',
      payload: 'approve',
      produced_by_role: 'coder',
    });
    expect(self.out?.source_artefacts).toContain(q.id);
    expect(await s.rt.executor!.execute(r.grant)).toBe('waiting');
    expect(existsSync(file)).toBe(false);
    expect((await openQuestions(s.bb)).map((x) => x.id)).toContain(q.id);
  });

  it('arguments too long to show whole are refused, not cut: nothing is asked and nothing runs', async () => {
    const file = `${stores.ws}/deploy-${setups() + 1}`;
    const long = 'y'.repeat(12_000); // each under the 16 KiB cap of an argument; together too long to show
    const s = await setup([call('deploy', { target: long, token: long, note: long }), submit('gave up')], {
      HOLT_LLM_TOOLS: JSON.stringify([deploy(file)]),
    });
    const r = await grantAndRun(s);
    expect(r.outcome).toBe('success');
    expect(lastTool(1)).toMatch(
      /deploy was not run: .*too long to show a person for approval \(at most 32000\)/,
    );
    expect(await approvals(s.bb)).toHaveLength(0);
    expect(existsSync(file)).toBe(false);
  });

  it('a pup gone while the call waited: another pup resumes the turn and runs the approved call once', async () => {
    const { s, r, q, file } = await asked();
    await answer(s.bb, q, 'approved');
    // A second pup of the same agent (the first holds nothing in memory that the stores do not have).
    const other = await startPupRuntime(
      stores,
      llmPupEnv(stores, s.instance, {
        HOLT_LLM_TOOLS: JSON.stringify([deploy(file)]),
        HOLT_BUDGET_ERROR_BASE_MS: '5',
      }),
    );
    try {
      expect(await other.rt.executor!.execute(r.grant)).toBe('success');
    } finally {
      await other.stop();
    }
    expect(readFileSync(file, 'utf8')).toBe('x');
    // The first pup, back, finds the turn done: the call does not run a second time.
    expect(await s.rt.executor!.execute(r.grant)).not.toBe('success');
    expect(readFileSync(file, 'utf8')).toBe('x');
    expect(await approvals(s.bb)).toHaveLength(1);
  });

  it('an MCP tool its server lists in requireApproval waits the same way, and runs once approved', async () => {
    const s = await setup([call('tiny__touch', { path: 'notes/a.txt' }), submit('touched')], {
      HOLT_LLM_MCP_SERVERS: JSON.stringify([
        { name: 'tiny', command: ['node', TINY], requireApproval: ['touch'] },
      ]),
    });
    const r = await grantAndRun(s);
    expect(r.outcome).toBe('waiting');
    const [q] = await approvals(s.bb);
    expect(q!.payload).toContain('the tool tiny__touch by agent coder');
    expect(q!.payload).toContain('"path": "notes/a.txt"');
    await answer(s.bb, q!, 'approve');
    expect(await s.rt.executor!.execute(r.grant)).toBe('success');
    expect(lastTool(1)).toContain('{&quot;path&quot;:&quot;notes/a.txt&quot;}');
  });

  it("a living agent's own turn cannot wait for a person: the call is refused at once and never runs", async () => {
    const file = `${stores.ws}/deploy-life`;
    const instance = 'stores.approval-life';
    stores.llm.reset([call('deploy', { target: 'prod' }), text('gave up')]);
    const pup = await startPupRuntime(
      stores,
      llmPupEnv(stores, instance, {
        HOLT_BUDGET_ERROR_BASE_MS: '5',
        HOLT_LLM_LIFE: 'true',
        HOLT_LIFE_POLL_MS: '200',
        HOLT_LLM_TOOLS: JSON.stringify([deploy(file)]),
      }),
    );
    try {
      await new LifeStore(stores.pool).enqueue({
        instance,
        role: 'coder',
        key: 'deploy-now',
        kind: 'message',
        body: 'deploy to prod',
        labels: labelsOf('operator', 'message', 'holt send', 'token t-operator'),
      });
      stores.nc.publish(lifeWakeSubject(instance, 'coder'));
      await stores.llm.waitForRequests(2, 30_000);
      expect(await approvals(pup.bb)).toHaveLength(0);
    } finally {
      await pup.stop();
    }
    expect(lastTool(1)).toMatch(/deploy was not run: .*a living agent's own turn cannot wait for one/);
    expect(existsSync(file)).toBe(false);
  });

  it('reads answers by their first word; anything unclear is a rejection with the answer as the reason', () => {
    for (const a of ['approve', 'Approved', 'YES', 'yes, go', 'approve: fine by me', '  yes.'])
      expect(verdictOf(a)).toEqual({ approved: true, reason: '' });
    expect(verdictOf('reject: not on a Friday')).toEqual({ approved: false, reason: 'not on a Friday' });
    expect(verdictOf('No, too risky')).toEqual({ approved: false, reason: 'too risky' });
    expect(verdictOf('deny')).toEqual({ approved: false, reason: 'rejected without a reason' });
    for (const a of ['yesterday it broke', 'yes-ish', 'ok', 'sure', 'I approve', '', 'approval pending'])
      expect(verdictOf(a)).toEqual({ approved: false, reason: a });
  });

  it('shows the invisible characters of the arguments (a bidi override cannot make prod read as dorp)', () => {
    expect(visible('{"target": "\u202Edorp", "x": "a\u200Bb\u0085c\u2028d"}\n')).toBe(
      '{"target": "\\u{202E}dorp", "x": "a\\u{200B}b\\u{85}c\\u{2028}d"}\n',
    );
    expect(visible('plain ASCII, accents é, 日本')).toBe('plain ASCII, accents é, 日本');
  });

  it('no agent may take the role a person answers under', () => {
    expect(roleName.safeParse('user').success).toBe(false);
    expect(roleName.safeParse('orchestrator').success).toBe(false);
    expect(roleName.safeParse('users').success).toBe(true);
  });

  it('holt questions shows the approval and holt answer approves it, as a person drives it', async () => {
    const { s, r, q, file } = await asked();
    // A local instance as `holt up` records it (its supervisor: a live process that says __supervise).
    const home = makeTempDir('approval-home');
    const supervisor = spawn(node, ['-e', 'setInterval(() => {}, 1 << 30)', '__supervise'], {
      stdio: 'ignore',
    });
    try {
      mkdirSync(join(home, 'instances', s.instance), { recursive: true });
      const state = {
        name: s.instance,
        workspace: stores.ws,
        holtFile: join(stores.ws, 'holt.yml'),
        supervisorPid: supervisor.pid,
        startedAt: Date.now(),
        status: 'running',
        redisUrl: stores.redis.url,
      };
      writeFileSync(join(home, 'instances', s.instance, 'state.json'), JSON.stringify(state));
      const holt = async (...args: string[]) =>
        (
          await promisify(execFile)(HOLT, [...args, '--name', s.instance], {
            env: { ...process.env, HOLT_HOME: home, NO_COLOR: '1' },
          })
        ).stdout;
      const listed = await holt('questions');
      expect(listed).toContain(q.id.slice(0, 8));
      expect(listed).toContain('Approve a call to the tool deploy by agent coder?');
      expect(await holt('answer', q.id.slice(0, 8), 'yes')).toContain(`(answers ${q.id})`);
      expect(await s.rt.executor!.execute(r.grant)).toBe('success');
      expect(readFileSync(file, 'utf8')).toBe('x');
      expect(await holt('questions')).toContain('No open questions.');
    } finally {
      supervisor.kill('SIGKILL');
      removeDir(home);
    }
  });

  it('require_approval and approval_timeout of the Holt file reach the pup (requireApproval, approvalTimeoutSeconds in the Agent)', () => {
    const agent = parseHoltFile(`
version: "2"
agents:
  Deployer:
    bidding_strategy: exclusive
    llm:
      approval_timeout: 10m
      tools:
        - {name: deploy, argv: [deploy, "{{target}}"], require_approval: true}
        - {name: status, argv: [status]}
`).agents[0]!;
    expect(agent.llm?.tools.map((t) => [t.name, t.requireApproval])).toEqual([
      ['deploy', true],
      ['status', false],
    ]);
    expect(agent.llm?.approvalTimeoutSeconds).toBe(600);
    const env = pupEnvironment(agent, { instance: 'i', role: 'Deployer', workspace: '/w', healthPort: 1 });
    const st = loadLlmSettings({ ...env, DATABASE_URL: 'postgres://x' });
    expect(st?.approvalTimeoutMs).toBe(600_000);
    expect(st?.tools.find((t) => t.name === 'deploy')?.requireApproval).toBe(true);
    // A workflow's code step runs unasked: it may not run a tool that needs approval.
    expect(() =>
      loadLlmSettings({
        ...env,
        DATABASE_URL: 'postgres://x',
        HOLT_LLM_WORKFLOW: JSON.stringify([
          { name: 'ship', code: { tool: 'deploy', args: { target: 'prod' } } },
        ]),
      }),
    ).toThrow(/step ship runs tool deploy, which needs a person's approval/);
    // Unset: an hour.
    expect(
      loadLlmSettings({ HOLT_LLM_ENABLED: 'true', DATABASE_URL: 'postgres://x' })?.approvalTimeoutMs,
    ).toBe(3_600_000);
  });
});
