import { spawn } from 'node:child_process';
import { resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { EXIT_FATAL } from './fatal.ts';

const fatal = resolve(import.meta.dirname, 'fatal.ts');

/** Runs a module in a real Node process with the handlers installed; its exit code and stderr. */
function run(body: string): Promise<{ code: number | null; stderr: string }> {
  const code = `import { installFatalHandlers } from ${JSON.stringify(fatal)}; installFatalHandlers('t'); ${body}`;
  const p = spawn(process.execPath, ['--input-type=module', '-e', code], {
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  p.stderr.on('data', (d) => {
    stderr += String(d);
  });
  return new Promise((r) => p.on('exit', (c) => r({ code: c, stderr })));
}

describe('fatal handlers', () => {
  it('an unhandled rejection is logged as one JSON line and the process exits non-zero', async () => {
    const r = await run("Promise.reject(new Error('boom')); setTimeout(() => {}, 5000);");
    expect(r.code).toBe(EXIT_FATAL);
    const line = JSON.parse(r.stderr.trim().split('\n').at(-1) as string);
    expect(line).toMatchObject({
      level: 'fatal',
      component: 't',
      event_type: 'unhandled_rejection',
      error: 'boom',
    });
  });

  it('so is an uncaught exception', async () => {
    const r = await run("setTimeout(() => { throw new Error('later'); }, 1);");
    expect(r.code).toBe(EXIT_FATAL);
    expect(r.stderr).toContain('"event_type":"uncaught_exception"');
  });

  it('a process that handles its rejections is left alone', async () => {
    const r = await run(
      "Promise.reject(new Error('x')).catch(() => {}); setTimeout(() => process.exit(0), 50);",
    );
    expect(r.code).toBe(0);
    expect(r.stderr).toBe('');
  });
});
