import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { call, submit } from '../../../test/harness/llm.ts';
import { eventually } from '../../../test/harness/wait.ts';
import { outputId } from '../../blackboard/grants.ts';
import { createPool } from '../../common/pg.ts';
import { grantedClaim } from '../../pup/testkit.ts';
import { usePupProcessStores } from '../llm.testkit.ts';

/** The pup as a real process, killed with SIGKILL in the middle of a turn, and its secrets. */

const KEY = 'sk-test-SECRET-4f9c2e7a1b';
const kit = usePupProcessStores('kill');

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
    };
    // Step 1 calls the tool; the model then hangs on step 2, and the pup is killed while it waits.
    llm.reset([call('work', {}), { hang: true }]);
    const first = kit.spawn(env);
    const { claim } = await grantedClaim(bb, {
      status: 'pending_exclusive',
      granted_exclusive_agent: 'coder',
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
