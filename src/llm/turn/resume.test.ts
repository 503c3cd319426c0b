import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Jaeger, startJaeger } from '../../../test/harness/jaeger.ts';
import { seen } from '../../../test/harness/jaeger-spans.ts';
import { call, submit } from '../../../test/harness/llm.ts';
import { eventually } from '../../../test/harness/wait.ts';
import { outputId } from '../../blackboard/grants.ts';
import { createPool } from '../../common/pg.ts';
import { grantedClaim } from '../../pup/testkit.ts';
import { usePupProcessStores } from '../llm.testkit.ts';

/**
 * The pup as a real process, killed with SIGKILL in the middle of a turn, and its secrets. Both pups
 * export their spans to a real Jaeger: the resumed turn continues the claim's trace.
 */

const KEY = 'sk-test-SECRET-4f9c2e7a1b';
const TRACE = '6e0c63257de34c926f9efcd03899a1b1';
const CLAIM_SPAN = '53995c3f42cd8ad8';
const kit = usePupProcessStores('kill');
let jaeger: Jaeger;
beforeAll(async () => {
  jaeger = await startJaeger();
});
afterAll(() => jaeger?.stop());

describe('resume after SIGKILL', () => {
  it('a killed pup resumes the same turn from its last stored step, never repeating a finished tool call; the key leaks nowhere', async () => {
    const [bb, llm, ws] = [kit.bb(), kit.llm(), kit.ws()];
    const marker = join(ws, 'runs.txt');
    // The tool counts its runs and prints its whole environment: the key must not be in it.
    const tool = {
      name: 'work',
      description: 'does the work',
      argv: [
        process.execPath,
        '-e',
        `require('fs').appendFileSync(${JSON.stringify(marker)},'run\\n');console.log('did work', JSON.stringify(process.env))`,
      ],
    };
    const env = {
      HOLT_LLM_TOOLS: JSON.stringify([tool]),
      HOLT_LLM_API_KEY_ENV: 'MY_LLM_KEY',
      MY_LLM_KEY: KEY,
      HOLT_LOG_LEVEL: 'debug',
      OTEL_EXPORTER_OTLP_ENDPOINT: jaeger.otlpHttpUrl,
      OTEL_BSP_SCHEDULE_DELAY: '100',
    };
    // Step 1 calls the tool; the model then hangs on step 2, and the pup is killed while it waits.
    llm.reset([call('work', {}), { hang: true }]);
    const first = kit.spawn(env);
    const { claim } = await grantedClaim(bb, {
      status: 'pending_exclusive',
      granted_exclusive_agent: 'coder',
      traceparent: `00-${TRACE}-${CLAIM_SPAN}-01`,
    });
    await llm.waitForRequests(2, 30_000);
    first.child.kill('SIGKILL');
    await first.exited;
    expect(readFileSync(marker, 'utf8')).toBe('run\n');

    llm.push(submit('finished after the restart'));
    const second = kit.spawn(env);
    const out = await eventually(
      'the result',
      () => bb.getArtefact(outputId('kill', claim.id, 'coder', 'exclusive')),
      { timeoutMs: 30_000 },
    );
    second.child.kill('SIGTERM');
    await second.exited;

    expect(out.payload).toBe('finished after the restart');
    expect(readFileSync(marker, 'utf8')).toBe('run\n'); // the tool ran once
    expect(llm.requests).toHaveLength(3); // step 1, step 2 (killed), step 2 again: step 1 not repeated
    const resumed = llm.requests[2]!.body.messages;
    expect(resumed.map((m) => m.role)).toEqual(['system', 'user', 'assistant', 'tool']);
    expect(resumed[3]!.content).toContain('did work');
    expect(second.output()).toContain('"event_type":"turn_resumed"');

    // The resumed turn continues the claim's trace: the second pup's invocation under the claim's span,
    // its model call under that (the very span the model server was handed), the result done.
    const resumedParent = String(llm.requests[2]!.headers.traceparent).split('-');
    expect(resumedParent[1]).toBe(TRACE);
    const spans = await eventually(
      "the resumed turn's invocation and model call in Jaeger",
      async () => {
        // A span is exported when it ends: the killed pup's invocation never did.
        const all = ((await jaeger.trace(TRACE))?.spans ?? []).map(seen);
        const chat = all.find((x) => x.spanId === resumedParent[2]);
        return chat && all.some((x) => x.spanId === chat.parentSpanId) ? all : undefined;
      },
      { timeoutMs: 30_000 },
    );
    const chat = spans.find((x) => x.spanId === resumedParent[2])!;
    const invocation = spans.find((x) => x.spanId === chat.parentSpanId)!;
    expect(chat.name).toBe('chat scripted');
    expect(invocation.name).toBe('invoke_agent coder');
    expect(invocation.parentSpanId).toBe(CLAIM_SPAN);
    expect(invocation.service).toBe('holt-pup');
    expect(JSON.stringify(spans)).not.toContain(KEY);

    // The key was used (the server saw it) and appears in no log line, artefact or stored step.
    expect(llm.requests[0]!.headers.authorization).toBe(`Bearer ${KEY}`);
    const logs = first.output() + second.output();
    expect(logs.length).toBeGreaterThan(0);
    expect(logs).not.toContain(KEY);
    expect(resumed[3]!.content).not.toContain(KEY);
    for (const a of await bb.getArtefacts(await bb.listArtefactIds()))
      expect(JSON.stringify(a)).not.toContain(KEY);
    const pool = createPool(kit.postgresUrl(), { max: 1 });
    pool.on('connect', (c) => c.on('error', () => undefined));
    const dump = await pool.query(
      `SELECT (SELECT json_agg(s) FROM holt.agent_steps s)::text AS steps, (SELECT json_agg(t) FROM holt.agent_turns t)::text AS turns`,
    );
    await pool.end();
    expect(dump.rows[0].steps).toContain('did work');
    expect(dump.rows[0].steps).not.toContain(KEY);
    expect(dump.rows[0].turns).not.toContain(KEY);
    expect(existsSync(marker)).toBe(true);
  });
});
