import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { call, submit } from '../../../test/harness/llm.ts';
import { eventually } from '../../../test/harness/wait.ts';
import { APPROVAL_TYPE } from '../../blackboard/approval.ts';
import { outputId } from '../../blackboard/grants.ts';
import type { Artefact } from '../../blackboard/types.ts';
import { artefact, grantedClaim } from '../../pup/testkit.ts';
import { usePupProcessStores } from '../llm.testkit.ts';

/** A real pup process SIGKILLed while its call waits for approval; the next pup runs the approved call once. */

const kit = usePupProcessStores('approve');

describe('approval across a killed pup', () => {
  it('a pup killed while the call waits: after a person approves, the next pup runs the call once', async () => {
    const [bb, llm, ws] = [kit.bb(), kit.llm(), kit.ws()];
    const marker = join(ws, 'deployed.txt');
    const tool = {
      name: 'deploy',
      description: 'deploys',
      parameters: { type: 'object', properties: { target: { type: 'string' } } },
      argv: [
        process.execPath,
        '-e',
        `require('fs').appendFileSync(${JSON.stringify(marker)},'x');console.log('deployed',process.argv[1])`,
        '{{target}}',
      ],
      requireApproval: true,
    };
    const env = { HOLT_LLM_TOOLS: JSON.stringify([tool]) };
    llm.reset([call('deploy', { target: 'prod' }), submit('deployed after the restart')]);
    const first = kit.spawn(env);
    const { claim } = await grantedClaim(bb, {
      status: 'pending_exclusive',
      granted_exclusive_agent: 'coder',
    });
    const approvals = async () =>
      (await bb.getArtefacts(await bb.listArtefactIds())).filter(
        (a): a is Artefact => a?.structural_type === 'Question' && a.type === APPROVAL_TYPE,
      );
    const q = await eventually('the approval question', async () => (await approvals())[0], {
      timeoutMs: 30_000,
    });
    await eventually('the turn to wait', () => first.output().includes('"event_type":"turn_waiting"'), {
      timeoutMs: 30_000,
    });
    first.child.kill('SIGKILL');
    await first.exited;
    expect(existsSync(marker)).toBe(false);

    await bb.createArtefact(
      artefact({
        structural_type: 'Answer',
        type: 'Answer',
        payload: 'approve',
        source_artefacts: [q.id],
        produced_by_role: 'user',
      }),
    );
    const second = kit.spawn(env);
    const out = await eventually(
      'the result',
      () => bb.getArtefact(outputId('approve', claim.id, 'coder', 'exclusive')),
      { timeoutMs: 30_000 },
    );
    second.child.kill('SIGTERM');
    await second.exited;
    expect(out.payload).toBe('deployed after the restart');
    expect(readFileSync(marker, 'utf8')).toBe('x'); // ran once
    expect(await approvals()).toHaveLength(1); // asked once
    expect(llm.requests).toHaveLength(2); // the call, then the result: no model call repeated
    expect(llm.requests[1]!.body.messages.at(-1)?.content).toContain('deployed prod');
  });
});
