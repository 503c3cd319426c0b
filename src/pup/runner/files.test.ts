import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { silentLogger } from '../../common/logger.ts';
import { fileOp } from './files.ts';
import { SocketToolRunner, startRunnerServer } from './socket.ts';

let base: string;
let ws: string;
let outside: string;
let server: Awaited<ReturnType<typeof startRunnerServer>>;
let runner: SocketToolRunner;

beforeAll(async () => {
  base = mkdtempSync(join(process.env.HOLT_TEST_TMP ?? tmpdir(), 'files-'));
  ws = join(base, 'ws');
  outside = join(base, 'outside');
  mkdirSync(join(ws, 'src'), { recursive: true });
  mkdirSync(outside);
  writeFileSync(join(outside, 'secret.txt'), 'not for the model\n');
  writeFileSync(join(ws, 'src', 'app.py'), 'print("hi")\nprint("hi")\n');
  symlinkSync(outside, join(ws, 'out-link'));
  const socket = join(base, 'runner.sock');
  server = await startRunnerServer({ socket, env: {}, log: silentLogger() });
  runner = new SocketToolRunner(socket);
});
afterAll(async () => {
  await new Promise<void>((resolve) => server.close(() => resolve()));
  rmSync(base, { recursive: true, force: true });
});

describe('workspace file operations (the built-in file tools), run by the tool runner', () => {
  it('list, write (making directories), read and patch inside the workspace', async () => {
    expect(
      await runner.file({
        op: 'write',
        root: ws,
        path: 'docs/new/readme.md',
        content: 'a\n',
        createDirs: true,
      }),
    ).toEqual({
      ok: true,
      output: 'wrote 2 bytes to docs/new/readme.md',
    });
    expect(readFileSync(join(ws, 'docs/new/readme.md'), 'utf8')).toBe('a\n');
    expect(await runner.file({ op: 'list', root: ws })).toEqual({
      ok: true,
      output: 'docs/\nout-link\nsrc/',
    });
    expect(await runner.file({ op: 'read', root: ws, path: 'src/app.py', maxBytes: 6 })).toMatchObject({
      ok: true,
      output: expect.stringMatching(/^print\(\n…\[truncated at 6 of 24 bytes\]$/),
    });
    expect(
      await runner.file({ op: 'patch', root: ws, path: 'docs/new/readme.md', old: 'a', new: 'b' }),
    ).toMatchObject({
      ok: true,
    });
    expect(readFileSync(join(ws, 'docs/new/readme.md'), 'utf8')).toBe('b\n');
    expect(
      await runner.file({ op: 'exists', root: ws, paths: ['src/app.py', 'gone.txt', '../outside'] }),
    ).toEqual({
      ok: true,
      output: '',
      exists: [true, false, false],
    });
  });

  it('refuses a path that leaves the workspace: "..", absolute, a symbolic link out, a leading dash', async () => {
    const refused = async (req: Parameters<typeof fileOp>[0]) => {
      const r = await runner.file(req);
      expect(r.ok).toBe(false);
      return r.ok ? '' : r.error;
    };
    expect(await refused({ op: 'read', root: ws, path: '../outside/secret.txt' })).toMatch(
      /must not contain "\.\."/,
    );
    expect(await refused({ op: 'read', root: ws, path: join(outside, 'secret.txt') })).toMatch(
      /not absolute/,
    );
    expect(await refused({ op: 'read', root: ws, path: 'out-link/secret.txt' })).toMatch(
      /leads outside the workspace/,
    );
    expect(await refused({ op: 'write', root: ws, path: 'out-link/planted.txt', content: 'x' })).toMatch(
      /leads outside the workspace/,
    );
    expect(await refused({ op: 'list', root: ws, path: '-rf' })).toMatch(/must not start with "-"/);
    expect(() => readFileSync(join(outside, 'planted.txt'))).toThrow(/ENOENT/);
  });

  it('a patch needs exactly one occurrence; a missing file or parent is an error, not a crash', async () => {
    expect(await fileOp({ op: 'patch', root: ws, path: 'src/app.py', old: 'print("hi")', new: 'x' })).toEqual(
      {
        ok: false,
        error: 'src/app.py: the text to replace occurs more than once; give more of it',
      },
    );
    expect(
      await fileOp({ op: 'patch', root: ws, path: 'src/app.py', old: 'absent', new: 'x' }),
    ).toMatchObject({
      ok: false,
      error: expect.stringMatching(/not found/),
    });
    expect(await fileOp({ op: 'read', root: ws, path: 'nope.txt' })).toEqual({
      ok: false,
      error: 'nope.txt: ENOENT',
    });
    expect(await fileOp({ op: 'write', root: ws, path: 'no/dir/x.txt', content: '' })).toEqual({
      ok: false,
      error: 'no/dir/x.txt: ENOENT',
    });
  });
});
