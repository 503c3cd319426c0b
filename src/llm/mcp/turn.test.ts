import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { call, submit } from '../../../test/harness/llm.ts';
import { llmPupEnv } from '../../../test/harness/llm-runtime.ts';
import { freePort } from '../../../test/harness/ports.ts';
import { eventually } from '../../../test/harness/wait.ts';
import { Blackboard } from '../../blackboard/client.ts';
import { outputId } from '../../blackboard/grants.ts';
import { silentLogger } from '../../common/logger.ts';
import { config, grantedClaim } from '../../pup/testkit.ts';
import { llmKit } from '../llm.testkit.ts';
import { startLlmPlugin } from '../plugin.ts';
import { EVERYTHING, httpEverything, stopChild, TINY } from './mcp.testkit.ts';

// A scripted model's turn that calls MCP servers' tools, through the pup's own runtime and runner.

const { stores, setup, grantAndRun, toolMessages, lastTool } = llmKit('llm-mcp');
const servers = (list: Record<string, unknown>[]) => ({ HOLT_LLM_MCP_SERVERS: JSON.stringify(list) });

describe('a turn with MCP servers', () => {
  it('offers server__tool with its schema, calls it, and reads the result as external evidence', async () => {
    const s = await setup(
      [
        call('everything__echo', { message: 'hello <b>' }),
        call('mcp_read_resource', { server: 'everything', uri: 'demo://resource/dynamic/text/1' }),
        call('mcp_read_resource', { server: 'everything', uri: 'demo://resource/dynamic/blob/2' }),
        call('mcp_get_prompt', { server: 'everything', name: 'args-prompt', arguments: { city: 'Lyon' } }),
        submit('echoed'),
      ],
      servers([{ name: 'everything', command: [EVERYTHING], tools: ['echo', 'get-sum'] }]),
    );
    const r = await grantAndRun(s);
    expect(r.outcome).toBe('success');
    expect(r.out?.payload).toBe('echoed');
    const offered = stores.llm.requests[0]!.body.tools!.map((t) => t.function.name);
    expect(offered).toEqual(expect.arrayContaining(['everything__echo', 'everything__get-sum']));
    // The allowlist: the server's other tools are not offered.
    expect(offered).not.toContain('everything__get-env');
    const echo = stores.llm.requests[0]!.body.tools!.find((t) => t.function.name === 'everything__echo');
    expect(echo?.function.parameters.properties).toHaveProperty('message');
    const msg = lastTool(1);
    expect(msg).toContain('authority="external_evidence"');
    expect(msg).toContain('surface="mcp everything echo"');
    expect(msg).toContain('Echo: hello &lt;b&gt;');
    // Resources by URI: text as it is, a blob as a reference; a prompt filled in. Each is evidence.
    expect(lastTool(2)).toMatch(
      /authority="external_evidence"[\s\S]*Resource 1: This is a plaintext resource/,
    );
    expect(lastTool(3)).toMatch(
      /\[resource demo:\/\/resource\/dynamic\/blob\/2 [^\]]*bytes of binary: not shown\]/,
    );
    expect(lastTool(4)).toMatch(/surface="mcp everything prompt args-prompt"[\s\S]*Lyon/);
  });

  it("checks the model's arguments like any tool's, and shows isError and a dead server as tool errors", async () => {
    const script = [
      call('tiny__touch', { path: '../../etc/passwd' }),
      call('tiny__touch', { path: 'a\u0000b' }),
      call('tiny__touch', { path: 'x'.repeat(20_000) }),
      call('everything__get-sum', { a: 'one' }),
      call('dying__boom', {}),
      call('tiny__touch', { path: './notes//a.txt' }),
      submit('checked'),
    ];
    const s = await setup(script, {
      ...servers([
        { name: 'tiny', command: ['node', TINY] },
        { name: 'everything', command: [EVERYTHING], tools: ['get-sum'] },
        { name: 'dying', command: ['node', TINY], tools: ['boom'] },
      ]),
      HOLT_LLM_MAX_STEPS: '12',
      HOLT_LLM_MAX_OUTPUT_ERRORS: '10',
    });
    const r = await grantAndRun(s);
    expect(r.outcome).toBe('success');
    expect(lastTool(1)).toMatch(/invalid arguments for tiny__touch: path: must not contain "\.\."/);
    expect(lastTool(2)).toMatch(/control character U\+0000 is not allowed/);
    expect(lastTool(3)).toMatch(/longer than 16384 bytes/);
    // (A require_approval call waits for a person: src/llm/turn/approval.test.ts.)
    expect(lastTool(4)).toMatch(/^<message [^>]*>\nerror: MCP error -32602/);
    // The server died mid-call: a transient error the model reads; the turn goes on.
    expect(lastTool(5)).toMatch(/^error: dying\/boom failed \(transient\): .*Connection closed/);
    // The path reached the server normalised.
    expect(lastTool(6)).toContain('{&quot;path&quot;:&quot;notes/a.txt&quot;}');
  });

  it("cancels a call at the turn's time box, not at the server's later timeout", async () => {
    const log = join(stores.ws, `cancelled-${Date.now()}.log`);
    const s = await setup([call('tiny__slow', {}), submit('never')], {
      ...servers([{ name: 'tiny', command: ['node', TINY, 'normal', log], timeoutSeconds: 3600 }]),
      HOLT_LLM_TURN_TIMEOUT_MS: '1500',
    });
    const r = await grantAndRun(s);
    // Without the cut the call would wait its hour: the test would never get here.
    expect(r.outcome).not.toBe('success');
    const failure = JSON.parse(r.out?.payload ?? '{}') as { reason?: string; transcript?: string };
    expect(failure.transcript).toMatch(
      /tiny__slow[\s\S]*error: tiny\/slow failed \(transient\): .*Request timed out/,
    );
    expect(failure.reason).toBe('time box: the turn ran for more than 2 s');
    await eventually(
      'the cancellation at the server',
      () => existsSync(log) && /^cancelled /.test(readFileSync(log, 'utf8')),
    );
  });

  it("runs a stdio server with the tools' environment: no store URL, no model key", async () => {
    // Naming a credential for it is refused when the agent is loaded.
    await expect(
      setup([], servers([{ name: 'tiny', command: ['node', TINY], env: ['DATABASE_URL'] }])),
    ).rejects.toThrow(/DATABASE_URL is a credential of the pup and is never passed on/);
    const s = await setup(
      [call('tiny__env', {}), submit('env seen')],
      servers([{ name: 'tiny', command: ['node', TINY], env: ['HOLT_AGENT_NAME'] }]),
    );
    const r = await grantAndRun(s);
    expect(r.outcome).toBe('success');
    const env = lastTool(1);
    expect(env).toContain('HOLT_AGENT_NAME&quot;:&quot;coder');
    for (const name of ['DATABASE_URL', 'REDIS_URL', 'NATS_URL', 'HOLT_LLM_API_KEY'])
      expect(env).not.toContain(name);
    expect(env).not.toContain(stores.postgres.url);
  });

  it("keeps a remote server's header out of the model's requests, the steps and the artefact", async () => {
    const TOKEN = 'mcp-header-token-7f3a9c';
    const port = await freePort();
    const child = await httpEverything('streamableHttp', port);
    try {
      stores.llm.reset([call('remote__echo', { message: `leak ${TOKEN}` }), submit(`payload ${TOKEN}`)]);
      const env = llmPupEnv(stores, 'stores.mcp-header', {
        ...servers([
          {
            name: 'remote',
            url: `http://127.0.0.1:${port}/mcp`,
            headers: { Authorization: { env: 'MCP_TOKEN', prefix: 'Bearer ' } },
          },
        ]),
        HOLT_BUDGET_ERROR_BASE_MS: '5',
      });
      const cfg = config(env);
      const bb = Blackboard.connect(stores.redis.url, cfg.instance);
      const rt = await startLlmPlugin({ ...cfg, llm: cfg.llm! }, bb, silentLogger(), {
        HOLT_LLM_API_KEY: 'sk-unit-test-key-000',
        MCP_TOKEN: TOKEN,
      });
      stores.cleanup.push(async () => {
        await rt.close();
        await bb.close();
      });
      const { claim } = await grantedClaim(bb, {
        status: 'pending_exclusive',
        granted_exclusive_agent: 'coder',
      });
      expect(await rt.executor!.execute({ claimId: claim.id, claimType: 'exclusive' })).toBe('success');
      const out = await bb.getArtefact(outputId(cfg.instance, claim.id, 'coder', 'exclusive'));
      expect(out?.payload).toBe('payload [redacted]');
      // The echo came back (the header got the session through) and was scrubbed before the model saw it.
      expect(toolMessages(1).join('\n')).toContain('Echo: leak [redacted]');
      expect(JSON.stringify(stores.llm.requests)).not.toContain(TOKEN);
      const steps = await stores.pool.query<{ m: string }>(
        'select metadata::text as m from holt.agent_steps',
      );
      expect(steps.rows.length).toBeGreaterThan(0);
      expect(steps.rows.map((x) => x.m).join('\n')).not.toContain(TOKEN);
    } finally {
      await stopChild(child);
    }
  });
});
