import { describe, expect, it } from 'vitest';
import { call, submit } from '../../test/harness/llm.ts';
import { eventually } from '../../test/harness/wait.ts';
import { outputId } from '../blackboard/grants.ts';
import { artefact } from '../blackboard/testkit.ts';
import { createPool } from '../common/pg.ts';
import { grantedClaim } from '../pup/testkit.ts';
import { usePupProcessStores } from './llm.testkit.ts';

/**
 * Long-term memory across a pup killed with SIGKILL: what a turn saved before the kill is kept, the
 * turn resumes without saving it twice, and a later claim's turn, on the restarted pup, recalls it.
 */
const kit = usePupProcessStores('memkill');
const env = { HOLT_LLM_MEMORY: 'true', HOLT_LLM_MEMORY_AUTO: 'false' };

describe('memory across SIGKILL', () => {
  it('a memory saved before the kill is recalled by the restarted pup in a later claim', async () => {
    const [bb, llm] = [kit.bb(), kit.llm()];
    llm.reset([
      call('memory_save', { text: 'The flaky auth test is tests/auth/login.test.ts.' }),
      { hang: true },
    ]);
    const first = kit.spawn(env);
    const { claim } = await grantedClaim(bb, {
      status: 'pending_exclusive',
      granted_exclusive_agent: 'coder',
    });
    await llm.waitForRequests(2, 30_000);
    first.child.kill('SIGKILL');
    await first.exited;

    llm.push(submit('noted the flaky test'));
    const second = kit.spawn(env);
    await eventually(
      'the resumed turn done',
      () => bb.getArtefact(outputId('memkill', claim.id, 'coder', 'exclusive')),
      {
        timeoutMs: 30_000,
      },
    );
    // The save was a finished tool call: the resumed turn did not run it again (nor fold a repeat).
    const pool = createPool(kit.postgresUrl(), { max: 1 });
    const notes = await pool.query<{ merged: number }>(
      `SELECT merged FROM holt.agent_memories WHERE kind = 'note'`,
    );
    await pool.end();
    expect(notes.rows).toEqual([{ merged: 0 }]);

    llm.push(submit('it is tests/auth/login.test.ts'));
    const later = await grantedClaim(
      bb,
      { status: 'pending_exclusive', granted_exclusive_agent: 'coder' },
      artefact({ type: 'Question', payload: 'Which auth test is flaky?' }),
    );
    await eventually(
      'the later claim done',
      () => bb.getArtefact(outputId('memkill', later.claim.id, 'coder', 'exclusive')),
      { timeoutMs: 30_000 },
    );
    second.child.kill('SIGTERM');
    await second.exited;
    const opening = llm.requests
      .at(-1)!
      .body.messages.filter((m) => m.role === 'user')
      .map((m) => String(m.content));
    expect(opening.join('\n')).toMatch(
      /From your long-term memory[\s\S]*The flaky auth test is tests\/auth\/login\.test\.ts\./,
    );
  });
});
