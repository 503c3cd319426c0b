import { describe, expect, it } from 'vitest';
import { call, type ScriptedReply, submit } from '../../../test/harness/llm.ts';
import { llmKit } from '../llm.testkit.ts';

const node = process.execPath;
const { stores, setup, grantAndRun, toolMessages, lastTool, setups } = llmKit('llm-args');

describe("the model's arguments are checked before anything runs", () => {
  it('paths stay in the workspace, control characters and oversized arguments are refused, one reply runs a capped number of calls; each refusal is a tool error and the turn goes on', async () => {
    const { mkdirSync, symlinkSync, writeFileSync } = await import('node:fs');
    const dir = `${stores.ws}/args-${setups()}`;
    mkdirSync(`${dir}/notes`, { recursive: true });
    writeFileSync(`${dir}/notes/a.txt`, 'inside the workspace\n');
    symlinkSync('/etc', `${dir}/etc-link`);
    symlinkSync('/tmp/holt-nowhere-yet', `${dir}/dangling`);
    const read = {
      name: 'read_file',
      description: 'read a file',
      parameters: {
        type: 'object',
        properties: { path: { type: 'string', format: 'path' } },
        required: ['path'],
      },
      argv: ['cat', '--', '{{path}}'],
    };
    const echo = {
      name: 'echo',
      description: 'echo',
      parameters: { type: 'object', properties: { msg: { type: 'string' } } },
      argv: [node, '-e', 'console.log("echo:" + process.argv[1])', '{{msg}}'],
      maxArgumentBytes: 64,
    };
    const script: ScriptedReply[] = [
      call('read_file', { path: '../../../etc/passwd' }),
      call('read_file', { path: '/etc/passwd' }),
      call('read_file', { path: 'etc-link/passwd' }),
      call('read_file', { path: 'dangling' }),
      call('read_file', { path: '-n' }),
      call('echo', { msg: 'a\u0000b' }),
      call('echo', { msg: 'bell\u0007' }),
      call('echo', { msg: 'x'.repeat(65) }),
      {
        toolCalls: [
          { name: 'echo', arguments: { msg: 'one' } },
          { name: 'echo', arguments: { msg: 'two' } },
          { name: 'echo', arguments: { msg: 'three' } },
        ],
      },
      call('read_file', { path: './notes//a.txt' }),
      submit('done'),
    ];
    const s = await setup(script, {
      HOLT_WORKSPACE: dir,
      HOLT_LLM_TOOLS: JSON.stringify([read, echo]),
      HOLT_LLM_MAX_STEPS: '20',
      HOLT_LLM_MAX_TOOL_CALLS: '2',
      // Eight refusals in a row by design: past the default bound of unusable outputs the turn would fail.
      HOLT_LLM_MAX_OUTPUT_ERRORS: '20',
    });
    const r = await grantAndRun(s);
    expect(r.outcome).toBe('success');
    expect(r.out?.payload).toBe('done');
    expect(lastTool(1)).toMatch(/invalid arguments for read_file: path: must not contain "\.\."/);
    expect(lastTool(2)).toMatch(/path: must be relative to the workspace, not absolute/);
    expect(lastTool(3)).toMatch(/path: leads outside the workspace/);
    expect(lastTool(4)).toMatch(/path: is a symbolic link to nowhere/);
    expect(lastTool(5)).toMatch(/path: must not start with "-"/);
    expect(lastTool(6)).toMatch(/msg: control character U\+0000 is not allowed/);
    expect(lastTool(7)).toMatch(/msg: control character U\+0007/);
    expect(lastTool(8)).toMatch(/msg: longer than 64 bytes/);
    const three = toolMessages(9).slice(-3);
    expect(three[0]).toContain('echo:one');
    expect(three[1]).toContain('echo:two');
    expect(three[2]).toMatch(/not run: at most 2 tool calls/);
    expect(lastTool(10)).toContain('inside the workspace');
    // Nothing outside the workspace was read, whatever the refusals' order.
    expect(toolMessages(10).join('\n')).not.toMatch(/root:x:0:0/);
  });
});
