import { execFileSync } from 'node:child_process';
import {
  chmodSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  renameSync,
  rmSync,
  symlinkSync,
  truncateSync,
  writeFileSync,
} from 'node:fs';
import { open } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { silentLogger } from '../../common/logger.ts';
import { fileOp } from './files.ts';
import { raceHook, verifyOpened } from './open-inside.ts';
import { SocketToolRunner, startRunnerServer } from './socket.ts';
import { workspacePath } from './workspace-path.ts';

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

describe('a workspace file is hostile input: nothing in it wedges the runner or leads it out', () => {
  const refused = async (req: Parameters<typeof fileOp>[0]) => {
    const r = await runner.file(req);
    expect(r.ok, JSON.stringify(r)).toBe(false);
    return r.ok ? '' : r.error;
  };

  it('a FIFO is refused for read, patch and write, at once (a read of it would block for good)', async () => {
    execFileSync('mkfifo', [join(ws, 'pipe')]);
    expect(await refused({ op: 'read', root: ws, path: 'pipe' })).toBe('pipe: is a FIFO, not a regular file');
    expect(await refused({ op: 'patch', root: ws, path: 'pipe', old: 'a', new: 'b' })).toMatch(/is a FIFO/);
    expect(await refused({ op: 'write', root: ws, path: 'pipe', content: 'x' })).toMatch(/is a FIFO/);
  });

  it('/dev/zero through a link is outside; a device node in the workspace is refused; a link is not followed', async () => {
    symlinkSync('/dev/zero', join(ws, 'zero'));
    expect(await refused({ op: 'read', root: ws, path: 'zero' })).toMatch(/leads outside the workspace/);
    let made = false;
    try {
      execFileSync('mknod', [join(ws, 'zdev'), 'c', '1', '5'], { stdio: 'ignore' });
      made = true;
    } catch {
      // not permitted here (not root, or no CAP_MKNOD): the link case above still holds
    }
    if (made)
      expect(await refused({ op: 'read', root: ws, path: 'zdev' })).toBe(
        'zdev: is a device, not a regular file',
      );
    // A link inside the workspace to a file inside it: still a link, and a link is not followed.
    symlinkSync('app.py', join(ws, 'src', 'alias.py'));
    expect(await refused({ op: 'read', root: ws, path: 'src/alias.py' })).toMatch(/is a symbolic link/);
    expect(await refused({ op: 'write', root: ws, path: 'src/alias.py', content: 'x' })).toMatch(
      /symbolic link/,
    );
    expect(readFileSync(join(ws, 'src', 'app.py'), 'utf8')).toBe('print("hi")\nprint("hi")\n');
  });

  it('a sparse 8 GiB file: a read shows its head, a patch refuses it, neither reads it whole', async () => {
    const big = join(ws, 'big.log');
    writeFileSync(big, 'head of the log\n');
    truncateSync(big, 8 * 1024 ** 3);
    expect(await refused({ op: 'read', root: ws, path: 'big.log', maxBytes: 64 })).toBe(
      'big.log: a binary file (not shown)',
    );
    expect(await runner.file({ op: 'read', root: ws, path: 'big.log', maxBytes: 15 })).toEqual({
      ok: true,
      output: `head of the log\n…[truncated at 15 of ${8 * 1024 ** 3} bytes]`,
    });
    expect(await refused({ op: 'patch', root: ws, path: 'big.log', old: 'head', new: 'x' })).toBe(
      `big.log: over 1048576 bytes (${8 * 1024 ** 3}); not patched`,
    );
  });

  it('a directory swapped for a link out between the check and the open: refused, the outside file untouched', async () => {
    mkdirSync(join(ws, 'swap'));
    writeFileSync(join(ws, 'swap', 'notes.txt'), 'inside\n');
    mkdirSync(join(outside, 'swap'));
    writeFileSync(join(outside, 'swap', 'notes.txt'), 'outside secret\n');
    raceHook.beforeOpen = async () => {
      renameSync(join(ws, 'swap'), join(ws, 'swap-was'));
      symlinkSync(join(outside, 'swap'), join(ws, 'swap'));
    };
    try {
      expect(await refused({ op: 'read', root: ws, path: 'swap/notes.txt' })).toMatch(/swapped for a link/);
      rmSync(join(ws, 'swap'));
      renameSync(join(ws, 'swap-was'), join(ws, 'swap'));
      expect(await refused({ op: 'write', root: ws, path: 'swap/notes.txt', content: 'planted' })).toMatch(
        /swapped for a link/,
      );
      rmSync(join(ws, 'swap'));
      renameSync(join(ws, 'swap-was'), join(ws, 'swap'));
      expect(await refused({ op: 'patch', root: ws, path: 'swap/notes.txt', old: 'o', new: 'x' })).toMatch(
        /swapped for a link/,
      );
    } finally {
      raceHook.beforeOpen = undefined;
    }
    expect(readFileSync(join(outside, 'swap', 'notes.txt'), 'utf8')).toBe('outside secret\n');
    // The check itself, on a descriptor that is outside however it was reached.
    const fh = await open(join(outside, 'secret.txt'), 'r');
    try {
      await expect(verifyOpened(fh, join(ws, 'x'), ws, await fh.stat())).rejects.toThrow(
        /outside the workspace/,
      );
    } finally {
      await fh.close();
    }
  });

  it('a mode-000 directory and a link loop end in a clear error (the guard fails closed)', async () => {
    mkdirSync(join(ws, 'locked'));
    writeFileSync(join(ws, 'locked', 'in.txt'), 'x');
    chmodSync(join(ws, 'locked'), 0);
    try {
      // Root reads through mode 000; anyone else gets EACCES. Either way an answer, not a hang.
      const r = await runner.file({ op: 'read', root: ws, path: 'locked/in.txt' });
      expect(r.ok ? r.output : r.error).toMatch(/^x$|EACCES/);
    } finally {
      chmodSync(join(ws, 'locked'), 0o755);
    }
    symlinkSync('loop', join(ws, 'loop'));
    expect(await refused({ op: 'read', root: ws, path: 'loop/x' })).toMatch(
      /loop\/x: cannot be checked \(ELOOP\)/,
    );
    expect(await workspacePath('loop', ws)).toMatchObject({ ok: false });
  });

  it('.git is written only by an agent that declared it (and its look-alikes are .git too)', async () => {
    mkdirSync(join(ws, '.git', 'hooks'), { recursive: true });
    for (const p of [
      '.git/config',
      '.GIT/hooks/pre-commit',
      'sub/.git/config',
      '.git./config',
      '.g\u200cit/x',
      'GIT~1/config',
    ])
      expect(
        await refused({ op: 'write', root: ws, path: p, content: '[core]\n', createDirs: true }),
        p,
      ).toMatch(/inside the repository’s \.git directory/);
    expect(await refused({ op: 'patch', root: ws, path: '.git/config', old: 'a', new: 'b' })).toMatch(
      /\.git directory/,
    );
    expect(existsSync(join(ws, '.git', 'config'))).toBe(false);
    expect(
      await runner.file({
        op: 'write',
        root: ws,
        path: '.git/hooks/pre-commit',
        content: '#!/bin/sh\n',
        allowGit: true,
      }),
    ).toEqual({ ok: true, output: 'wrote 10 bytes to .git/hooks/pre-commit' });
    expect(await runner.file({ op: 'read', root: ws, path: '.git/hooks/pre-commit' })).toEqual({
      ok: true,
      output: '#!/bin/sh\n',
    });
  });
});
