import { readFileSync } from 'node:fs';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { describe, expect, it } from 'vitest';
import { call, submit, text } from '../../../test/harness/llm.ts';
import { readAgentStatuses } from '../../blackboard/agent-status.ts';
import { llmAgentLines } from '../../cli/commands/status.ts';
import { artefact, config } from '../../pup/testkit.ts';
import { constant, counter, llmKit } from '../llm.testkit.ts';

const node = process.execPath;
const { stores, setup, grantAndRun, runUntilKilled, toolMessages, lastTool, setups } = llmKit('llm-turn');

describe('the turn', () => {
  it('submit_result becomes the artefact (once per turn); steps, usage and chunks are recorded', async () => {
    const _nc: NatsConnection = await connect({ servers: stores.nats.url });
    const chunks: string[] = [];
    const sub = stores.nc.subscribe('evt.agent.*.chunk', {
      callback: (_e, m) => {
        chunks.push((m.json() as { text: string }).text);
      },
    });
    const s = await setup([
      call('submit_result', { artefact_type: 'Doc' }), // invalid: schema error fed back
      {
        text: 'Here is the answer.',
        toolCalls: [
          {
            name: 'submit_result',
            arguments: {
              artefact_type: 'Doc',
              artefact_payload: 'v1',
              summary: 's1',
              structural_type: 'Standard',
            },
          },
          {
            name: 'submit_result',
            arguments: { artefact_type: 'Doc', artefact_payload: 'v2', summary: 's2' },
          },
        ],
      },
    ]);
    const r = await grantAndRun(s);
    expect(r.outcome).toBe('success');
    expect(r.out).toMatchObject({
      type: 'Doc',
      payload: 'v1',
      structural_type: 'Standard',
      produced_by_role: 'coder',
    });
    expect(lastTool(1)).toMatch(/invalid arguments for submit_result: .*artefact_payload/);
    expect(stores.llm.requests[0]!.body.stream).toBe(true);
    const steps = await stores.pool.query(
      `SELECT s.kind, s.tool_call_ids, s.metadata FROM holt.agent_steps s JOIN holt.agent_turns t USING (turn_id)
       WHERE t.instance = $1 ORDER BY s.seq`,
      [s.instance],
    );
    expect(steps.rows.map((x) => x.kind)).toEqual(['init', 'llm', 'tool', 'llm', 'tool']);
    expect(steps.rows[3].metadata.llm_usage).toMatchObject({ promptTokens: 100, completionTokens: 20 });
    expect(steps.rows[3].tool_call_ids).toHaveLength(2);
    const usage = await stores.pool.query(
      'SELECT count(*)::int AS n FROM holt.llm_usage WHERE instance = $1',
      [s.instance],
    );
    expect(usage.rows[0].n).toBe(2);
    // The same two calls in the pup's metrics (streamed replies too).
    expect(await s.registry.getSingleMetricAsString('holt_llm_tokens_total')).toMatch(
      /holt_llm_tokens_total\{direction="input"\} 200\n/,
    );
    const turn = await stores.pool.query('SELECT status FROM holt.agent_turns WHERE instance = $1', [
      s.instance,
    ]);
    expect(turn.rows[0].status).toBe('done');
    await stores.nc.flush();
    expect(chunks.join('')).toContain('Here is the answer.');
    sub.unsubscribe();
    await stores.nc.close();
  });

  it('declared tools: defaults fill, fixed args and env are injected and hidden; bad args get the schema error', async () => {
    const tool = {
      name: 'echo',
      description: 'echo',
      parameters: {
        type: 'object',
        properties: { msg: { type: 'string' }, n: { type: 'integer' }, secret: { type: 'string' } },
        required: ['msg'],
      },
      argv: [
        node,
        '-e',
        'console.log(process.argv.slice(1).join("|"), process.env.TOOL_FLAG)',
        '{{msg}}',
        '{{n}}',
        '{{secret}}',
      ],
      defaults: { n: 7 },
      fixed: { secret: 'hidden-value' },
      env: { TOOL_FLAG: 'flag-on' },
    };
    const s = await setup([call('echo', { msg: 42 }), call('echo', { msg: 'hi' }), submit('ok')], {
      HOLT_LLM_TOOLS: JSON.stringify([tool]),
    });
    const r = await grantAndRun(s);
    expect(r.outcome).toBe('success');
    const visible = stores.llm.requests[0]!.body.tools!.find((t) => t.function.name === 'echo')!;
    expect(Object.keys(visible.function.parameters.properties ?? {})).toEqual(['msg', 'n']);
    expect(lastTool(1)).toMatch(/invalid arguments for echo: msg/);
    expect(lastTool(2)).toContain('hi|7|hidden-value flag-on');
  });

  it('must_end_with: a reply without tools is nudged; without must_end_with its text is the result', async () => {
    const s1 = await setup([text('I think I am done'), submit('final')], {
      HOLT_LLM_MUST_END_WITH: 'submit_result',
    });
    const r1 = await grantAndRun(s1);
    expect(r1.out?.payload).toBe('final');
    expect(stores.llm.requests[1]!.body.messages.at(-1)?.content).toMatch(
      /must end with a call to submit_result/,
    );
    const s2 = await setup([text('plain answer')]);
    const r2 = await grantAndRun(s2);
    expect(r2.out).toMatchObject({ type: 'LlmResult', payload: 'plain answer' });
  });

  it('declared result fields: a submission without them goes back to the model with what is wrong; one that carries them is the artefact', async () => {
    const s = await setup(
      [submit('just prose'), submit('{"title":"T"}'), submit('{"title":"T","score":3}')],
      {
        HOLT_LLM_RESULT_FIELDS: JSON.stringify({
          title: { type: 'string' },
          score: { type: 'integer', description: 'out of 5' },
        }),
      },
    );
    const r = await grantAndRun(s);
    expect(r.outcome).toBe('success');
    expect(r.out).toMatchObject({ type: 'Result', payload: '{"title":"T","score":3}' });
    // The model is told the fields up front, in the prompt and in submit_result's description.
    expect(stores.llm.requests[0]!.body.messages[0]!.content).toContain(
      '- score (integer, required): out of 5',
    );
    const submitSpec = stores.llm.requests[0]!.body.tools!.find((t) => t.function.name === 'submit_result');
    expect(JSON.stringify(submitSpec)).toContain('- title (string, required)');
    expect(lastTool(1)).toMatch(/does not carry the declared fields: .*not JSON/);
    expect(lastTool(2)).toMatch(/does not carry the declared fields: score: /);
  });

  it('must_end_with naming a terminate tool: submit_result is refused and not offered, a failed run ends nothing, a good one is the result', async () => {
    const publish = {
      name: 'publish',
      description: 'publish the report',
      parameters: { type: 'object', properties: { ok: { type: 'boolean' } } },
      argv: [
        node,
        '-e',
        'if (process.argv[1] !== "true") { console.error("not ready"); process.exit(2) } console.log("published: report-1")',
        '{{ok}}',
      ],
      terminate: true,
    };
    const s = await setup(
      [
        call('submit_result', { artefact_type: 'Doc', artefact_payload: 'x', summary: 's' }),
        call('publish', { ok: false }),
        call('publish', { ok: true }),
        submit('never reached'),
      ],
      { HOLT_LLM_TOOLS: JSON.stringify([publish]), HOLT_LLM_MUST_END_WITH: 'publish' },
    );
    const r = await grantAndRun(s);
    expect(r.outcome).toBe('success');
    expect(r.out).toMatchObject({
      type: 'LlmResult',
      payload: 'published: report-1',
      produced_by_role: 'coder',
    });
    const offered = stores.llm.requests[0]!.body.tools!.map((t) => t.function.name);
    expect(offered).toContain('publish');
    expect(offered).not.toContain('submit_result');
    expect(lastTool(1)).toMatch(/ends only with publish, not submit_result/);
    expect(lastTool(2)).toMatch(/exit code 2[\s\S]*did not succeed, so it did not end the turn/);
    expect(stores.llm.requests).toHaveLength(3); // the good run ended the turn: no fourth model call
  });

  it('a pup refuses a must_end_with that names a call which can never end a turn', async () => {
    expect(() =>
      config({
        REDIS_URL: stores.redis.url,
        HOLT_AGENT_COMMAND: '',
        HOLT_LLM_ENABLED: 'true',
        DATABASE_URL: stores.postgres.url,
        HOLT_LLM_TOOLS: JSON.stringify([constant]),
        HOLT_LLM_MUST_END_WITH: 'read',
      }),
    ).toThrow(
      /^HOLT_LLM_MUST_END_WITH: read cannot end a turn: name submit_result or a tool with terminate: true$/,
    );
  });

  it('a refused key pauses the agent at once: no retry, a Failure of class auth, the reason in its status and in holt status', async () => {
    const s = await setup([
      {
        status: 401,
        body: JSON.stringify({
          error: {
            message: 'Incorrect API key provided',
            type: 'invalid_request_error',
            code: 'invalid_api_key',
          },
        }),
      },
    ]);
    const r = await grantAndRun(s);
    expect(r.outcome).toBe('failure');
    expect(stores.llm.requests).toHaveLength(1); // HOLT_LLM_MAX_RETRIES is 1: an auth error is not retried
    const body = JSON.parse(r.out!.payload);
    expect(body).toMatchObject({ error_class: 'auth', reason: expect.stringMatching(/HTTP 401/) });
    const st = (await readAgentStatuses(s.bb.redis, s.instance, ['coder'])).get('coder');
    expect(st).toMatchObject({
      state: 'paused',
      paused_class: 'auth',
      paused_reason: expect.stringMatching(/^auth: .*HTTP 401/),
    });
    const lines = llmAgentLines(new Map([['coder', st!]])).join('\n');
    expect(lines).toMatch(/coder .*paused \(auth\).*auth: model call failed .*HTTP 401/);
    // Paused: the next grant fails at once, with the same class, and asks the model nothing.
    const again = await grantAndRun(s);
    expect(again.outcome).toBe('failure');
    expect(JSON.parse(again.out!.payload)).toMatchObject({
      error_class: 'auth',
      reason: expect.stringMatching(/^agent paused: auth: /),
    });
    expect(stores.llm.requests).toHaveLength(1);
    expect(await s.registry.getSingleMetricAsString('holt_llm_errors_total')).toMatch(
      /class="auth"[^}]*\} 1/,
    );
  });

  it('a wrong model is a config error and pauses too; a server outage is transient and does not', async () => {
    const s1 = await setup([
      { status: 404, body: JSON.stringify({ error: { message: 'The model `scripted` does not exist' } }) },
    ]);
    const r1 = await grantAndRun(s1);
    expect(JSON.parse(r1.out!.payload)).toMatchObject({ error_class: 'config' });
    const st1 = (await readAgentStatuses(s1.bb.redis, s1.instance, ['coder'])).get('coder');
    expect(st1).toMatchObject({ state: 'paused', paused_class: 'config' });
    // What `holt status` prints for it: the class and the reason.
    expect(llmAgentLines(new Map([['coder', st1!]])).join('\n')).toMatch(
      /coder .*paused \(config\).*config: model call failed .*HTTP 404.*does not exist/,
    );
    const s2 = await setup([{ status: 503 }, { status: 503 }]);
    const r2 = await grantAndRun(s2);
    expect(stores.llm.requests).toHaveLength(2); // retried once
    expect(JSON.parse(r2.out!.payload)).toMatchObject({ error_class: 'transient' });
    expect((await readAgentStatuses(s2.bb.redis, s2.instance, ['coder'])).get('coder')).toMatchObject({
      state: 'active',
    });
  });

  it('unusable outputs are shown to the model a bounded number of times, then the turn fails as model_output', async () => {
    const s = await setup(
      [call('no_such_tool'), call('submit_result', { artefact_type: 'Doc' }), call('nope'), submit('late')],
      {
        HOLT_LLM_MAX_OUTPUT_ERRORS: '3',
      },
    );
    const r = await grantAndRun(s);
    expect(r.outcome).toBe('failure');
    const body = JSON.parse(r.out!.payload);
    expect(body).toMatchObject({ error_class: 'model_output' });
    expect(body.reason).toMatch(/unusable 3 times in a row \(last: error: unknown tool "nope"/);
    expect(lastTool(1)).toMatch(/unknown tool "no_such_tool"/);
    expect(stores.llm.requests).toHaveLength(3);
  });

  it('coding agent: built-in file tools confined to the workspace, and the state probe before each call', async () => {
    const { mkdirSync, readFileSync, existsSync } = await import('node:fs');
    const dir = `${stores.ws}/coding-${setups()}`;
    mkdirSync(dir, { recursive: true });
    const failing = { name: 'test', description: 'run the tests', argv: [node, '-e', 'process.exit(1)'] };
    const s = await setup(
      [
        call('workspace_write', { path: 'pkg/hello.py', content: 'print("hello")\n', create_dirs: true }),
        call('workspace_read', { path: '../../../etc/passwd' }),
        call('test'),
        call('workspace_patch', { path: 'pkg/hello.py', old: 'hello', new: 'world' }),
        submit('done'),
      ],
      {
        HOLT_WORKSPACE: dir,
        HOLT_LLM_FILE_TOOLS: 'true',
        HOLT_LLM_TOOLS: JSON.stringify([failing]),
        HOLT_LLM_MAX_STEPS: '10',
      },
    );
    const r = await grantAndRun(s);
    expect(r.outcome).toBe('success');
    expect(readFileSync(`${dir}/pkg/hello.py`, 'utf8')).toBe('print("world")\n');
    expect(existsSync('/etc/passwd') && lastTool(2)).toMatch(
      /^error: \.\.\/\.\.\/\.\.\/etc\/passwd: must not contain "\.\."/,
    );
    const offered = stores.llm.requests[0]!.body.tools!.map((t) => t.function.name);
    expect(offered).toEqual(
      expect.arrayContaining(['workspace_list', 'workspace_read', 'workspace_write', 'workspace_patch']),
    );
    // No probe before anything happened; then facts only, bounded, refreshed before each call.
    const probes = stores.llm.requests.map(
      (q) =>
        q.body.messages.filter((m) => m.role === 'user' && m.content?.startsWith('[workspace state')).at(-1)
          ?.content ?? '',
    );
    expect(probes[0]).toBe('');
    expect(probes[1]).toContain('files written this turn: pkg/hello.py\n  still present: pkg/hello.py');
    expect(probes[3]).toMatch(/last commands: test → exit code 1/);
    expect(probes[3]).toMatch(
      /recent errors: workspace_read \.\.\/\.\.\/\.\.\/etc\/passwd: .*; test → exit code 1/,
    );
    for (const p of probes) expect(p.length).toBeLessThanOrEqual(1500);
  });

  it('file tools: .git is refused unless the agent declared fileToolsAllowGit (hooks and config there run programs)', async () => {
    const { mkdirSync, readFileSync, existsSync } = await import('node:fs');
    for (const allow of [false, true]) {
      const dir = `${stores.ws}/dotgit-${allow}-${setups()}`;
      mkdirSync(`${dir}/.git`, { recursive: true });
      const s = await setup(
        [
          call('workspace_write', { path: '.git/config', content: '[core]\n\tfsmonitor = /tmp/x\n' }),
          call('workspace_write', {
            path: '.GIT/hooks/pre-commit',
            content: '#!/bin/sh\n',
            create_dirs: true,
          }),
          submit('done'),
        ],
        {
          HOLT_WORKSPACE: dir,
          HOLT_LLM_FILE_TOOLS: 'true',
          ...(allow ? { HOLT_LLM_FILE_TOOLS_ALLOW_GIT: 'true' } : {}),
          HOLT_LLM_MAX_STEPS: '5',
        },
      );
      expect((await grantAndRun(s)).outcome).toBe('success');
      const shown = toolMessages(2);
      if (allow) {
        expect(shown).toEqual(['wrote 27 bytes to .git/config', 'wrote 10 bytes to .GIT/hooks/pre-commit']);
        expect(readFileSync(`${dir}/.git/config`, 'utf8')).toContain('fsmonitor');
      } else {
        for (const m of shown) expect(m).toMatch(/^error: .*inside the repository’s \.git directory/);
        expect(existsSync(`${dir}/.git/config`)).toBe(false);
        expect(existsSync(`${dir}/.GIT`)).toBe(false);
      }
    }
  });

  it('compaction keeps the last exchanges, stores the summary as a step, and a resumed turn sees the same context', async () => {
    const file = `${stores.ws}/compact-${setups()}`;
    const s = await setup(
      [
        ...['a', 'b', 'c', 'd', 'e'].map((tag) => call('count', { tag })),
        text('SUMMARY: counted a, b and c; all ran'),
        { hang: true }, // the pup "dies" waiting for this reply
      ],
      {
        HOLT_LLM_TOOLS: JSON.stringify([counter(file)]),
        HOLT_LLM_HISTORY_KEEP: '2',
        HOLT_LLM_MAX_STEPS: '20',
      },
    );
    // The pup "dies" while the seventh model call hangs.
    const { grant } = await runUntilKilled(s, 7);
    // The summary request saw the older exchanges; the next call saw the head, the summary and the last two.
    expect(JSON.stringify(stores.llm.requests[5]!.body.messages)).toContain('count({\\"tag\\":\\"a\\"})');
    const before = stores.llm.requests[6]!.body.messages;
    const tools = before.filter((m) => m.role === 'tool').map((m) => m.content ?? '');
    expect(tools).toEqual([expect.stringContaining('run 4'), expect.stringContaining('run 5')]);
    expect(
      before.some(
        (m) =>
          m.content === '[summary of the earlier work in this turn]\nSUMMARY: counted a, b and c; all ran',
      ),
    ).toBe(true);
    // Resumed from the stored steps: the same messages, no second summary, no tool run again.
    stores.llm.push(submit('done'));
    expect(await s.rt.executor!.execute(grant)).toBe('success');
    expect(stores.llm.requests).toHaveLength(8);
    expect(stores.llm.requests[7]!.body.messages).toEqual(before);
    expect(readFileSync(file, 'utf8')).toBe('xxxxx');
    const kinds = await stores.pool.query(
      `SELECT s.kind FROM holt.agent_steps s JOIN holt.agent_turns t USING (turn_id) WHERE t.instance = $1 ORDER BY s.seq`,
      [s.instance],
    );
    expect(kinds.rows.map((x) => x.kind).filter((k) => k === 'compact')).toHaveLength(1);
  });

  it('a goal past its time box fails the turn before any model call (class quota)', async () => {
    const s = await setup([submit('never')], { HOLT_LLM_GOAL_TIMEOUT_MS: '60000' });
    const r = await grantAndRun(s, artefact({ created_at_ms: Date.now() - 120_000 }));
    expect(r.outcome).toBe('failure');
    expect(JSON.parse(r.out!.payload)).toMatchObject({
      error_class: 'quota',
      reason: 'time box: the goal has been worked on for more than 60 s',
    });
    expect(stores.llm.requests).toHaveLength(0);
  });

  it('step budget: warning two steps before the end, last step only submit_result, then a Failure with the transcript', async () => {
    const file = `${stores.ws}/budget-${setups()}`;
    const s = await setup(
      [call('count', { tag: 'a' }), call('count', { tag: 'b' }), call('count', { tag: 'c' })],
      {
        HOLT_LLM_TOOLS: JSON.stringify([counter(file)]),
        HOLT_LLM_MAX_STEPS: '3',
      },
    );
    const r = await grantAndRun(s);
    expect(r.outcome).toBe('failure');
    expect(r.out?.structural_type).toBe('Failure');
    const body = JSON.parse(r.out!.payload);
    expect(body.reason).toMatch(/step budget exhausted: 3 steps/);
    expect(body.transcript).toMatch(/step 1: count/);
    expect(stores.llm.requests[1]!.body.messages.at(-1)?.content).toMatch(/Two steps remain/);
    expect(stores.llm.requests[2]!.body.tools!.map((t) => t.function.name)).toEqual(['submit_result']);
    expect(lastTool(2)).toContain('run 2');
  });

  it('loop guard: the third identical call, A-B-A-B and repeated identical reads are blocked and recorded', async () => {
    const file = `${stores.ws}/loop-${setups()}`;
    const s = await setup(
      [
        call('count', { tag: 'x' }),
        call('count', { tag: 'x' }),
        call('count', { tag: 'x' }), // 3rd identical: blocked
        call('count', { tag: 'y' }),
        call('count', { tag: 'z' }),
        call('count', { tag: 'y' }),
        call('count', { tag: 'z' }), // A-B-A-B: blocked
        call('read'),
        call('read'), // same result again: blocked from now on
        call('read'),
        submit('done'),
      ],
      { HOLT_LLM_TOOLS: JSON.stringify([counter(file), constant]), HOLT_LLM_MAX_STEPS: '20' },
    );
    const r = await grantAndRun(s);
    expect(r.outcome).toBe('success');
    expect(lastTool(3)).toMatch(/BLOCKED.*already made 2 times/);
    expect(lastTool(7)).toMatch(/BLOCKED.*A-B-A-B/);
    expect(lastTool(9)).toMatch(/exactly the same result/);
    expect(lastTool(10)).toMatch(/BLOCKED.*blocked earlier/);
    const { readFileSync } = await import('node:fs');
    expect(readFileSync(file, 'utf8')).toHaveLength(5); // x, x, y, z, y ran; the blocked ones did not
    const blocks = await stores.pool.query(
      `SELECT s.metadata->'block'->>'rule' AS rule FROM holt.agent_steps s JOIN holt.agent_turns t USING (turn_id)
       WHERE t.instance = $1 AND s.metadata ? 'block' ORDER BY s.seq`,
      [s.instance],
    );
    expect(blocks.rows.map((x) => x.rule)).toEqual(['repeat', 'alternation', 'same_result', 'blocked']);
  });

  it('planning: decomposes, advances on mark_subtask_complete, escalates a subtask failing twice, then gives up', async () => {
    const s = await setup(
      [
        text('{"tasks":[{"description":"T","subtasks":["first","second"]}]}'),
        call('mark_subtask_complete', { success: true }),
        call('mark_subtask_complete', { success: false, reason: 'broke' }),
        call('mark_subtask_complete', { success: false, reason: 'broke again' }),
        text('{"subtasks":["second-a","second-b"]}'),
        call('mark_subtask_complete', { success: false, reason: 'no' }),
        call('mark_subtask_complete', { success: false, reason: 'still no' }),
      ],
      { HOLT_LLM_PLANNING: 'true', HOLT_LLM_MAX_STEPS: '10' },
    );
    const r = await grantAndRun(s);
    expect(stores.llm.requests[0]!.body.response_format).toEqual({ type: 'json_object' });
    expect(stores.llm.requests[1]!.body.messages.at(-1)?.content).toMatch(/→ \[1\.1\] first/);
    expect(lastTool(2)).toMatch(/Next subtask: \[1\.2\] second/);
    expect(lastTool(3)).toMatch(/failed \(1 time\)/);
    expect(lastTool(5)).toMatch(/broken into smaller steps. Next: \[1\.2\.1\] second-a/);
    expect(r.outcome).toBe('failure');
    expect(JSON.parse(r.out!.payload).reason).toMatch(/planning gave up: subtask 1\.2\.1 failed 2 times/);
  });
});
