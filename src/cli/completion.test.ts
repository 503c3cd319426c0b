import { execFile } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { makeTempDir, removeDir } from '../../test/harness/tmp.ts';
import { bashCompletion, zshCompletion } from './completion.ts';
import { program } from './main.ts';

const run = promisify(execFile);
const dir = makeTempDir('completion');
afterAll(() => removeDir(dir));

const RUNTIME = { orchestrator: (await import('../orchestrator/program.ts')).ORCHESTRATOR_PROGRAM };

/** What bash completes for the words typed so far (the last one being completed). */
async function complete(...typed: string[]): Promise<string[]> {
  const file = join(dir, 'holt.bash');
  writeFileSync(file, bashCompletion(program(), RUNTIME));
  const words = typed.map((w) => `'${w}'`).join(' ');
  const script = `source '${file}'; COMP_WORDS=(holt ${words}); COMP_CWORD=${typed.length}; _holt; printf '%s\\n' "\${COMPREPLY[@]}"`;
  const { stdout } = await run('bash', ['-c', script]);
  return stdout.split('\n').filter(Boolean).sort();
}

describe('holt completion (real bash and zsh)', () => {
  it('bash completes commands, then the flags of the command typed', async () => {
    expect(await complete('sta')).toEqual(['status']);
    expect(await complete('up', '--f')).toEqual(['--file', '--force']);
    expect(await complete('--ku')).toEqual(['--kube']);
    // A global flag's value is not taken for the command.
    expect(await complete('--kube', 'ns/demo', 'status', '--j')).toEqual(['--json']);
    // The runtime programs complete their own settings.
    expect(await complete('orchestrator', '--retention-')).toEqual([
      '--retention-days',
      '--retention-sweep-ms',
    ]);
    // Hidden commands are never offered.
    expect(await complete('__')).toEqual([]);
  });

  it('zsh loads the function and registers it for holt', async () => {
    const file = join(dir, '_holt');
    writeFileSync(file, zshCompletion(program(), RUNTIME));
    await run('zsh', ['-n', file]);
    const { stdout } = await run('zsh', [
      '-fc',
      `autoload -U compinit && compinit -u -d '${join(dir, 'zcompdump')}' && source '${file}' && print -r -- $_comps[holt] && whence -w _holt`,
    ]);
    expect(stdout.split('\n')).toEqual(['_holt', '_holt: function', '']);
    expect(zshCompletion(program(), RUNTIME)).toContain("'status:an instance");
  });
});
