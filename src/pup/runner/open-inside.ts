import { constants, type Stats } from 'node:fs';
import { type FileHandle, lstat, open, readlink, realpath, stat } from 'node:fs/promises';
import path from 'node:path';
import { inside } from './workspace-path.ts';

/**
 * Opening a workspace file as hostile input: the path guard (workspace-path.ts) ran before, but a tool
 * can swap a directory for a link between the guard and the open, or leave a FIFO, a device or a
 * multi-gigabyte file where a text file was. So: never open what is not a regular file (lstat first,
 * fstat after), never follow a final link (O_NOFOLLOW), never block on open (O_NONBLOCK), and check
 * where the descriptor really is (/proc/self/fd) before a byte is read or written.
 */

export class Refused extends Error {}

const kind = (st: Stats) =>
  st.isSymbolicLink()
    ? 'a symbolic link'
    : st.isDirectory()
      ? 'a directory'
      : st.isFIFO()
        ? 'a FIFO'
        : st.isCharacterDevice() || st.isBlockDevice()
          ? 'a device'
          : st.isSocket()
            ? 'a socket'
            : 'not a regular file';

/** Test hook: runs after the path guard, before the open, where a swap would happen (files.test.ts). */
export const raceHook: { beforeOpen?: () => Promise<void> } = {};

const BASE = constants.O_NOFOLLOW | constants.O_NONBLOCK | constants.O_NOCTTY;

/**
 * Opens `root/rel` (rel already guarded): `read` an existing file, `rw` an existing file to patch,
 * `write` an existing or new one (not truncated here: the caller truncates once it is verified).
 */
export async function openInside(
  root: string,
  rel: string,
  mode: 'read' | 'rw' | 'write',
): Promise<{ fh: FileHandle; st: Stats }> {
  const abs = path.join(root, rel);
  await raceHook.beforeOpen?.();
  const before = await lstat(abs).catch((e: NodeJS.ErrnoException) => {
    if (mode === 'write' && e.code === 'ENOENT') return undefined;
    throw e;
  });
  if (before && !before.isFile()) throw new Refused(`is ${kind(before)}, not a regular file`);
  const flags =
    BASE |
    (mode === 'read' ? constants.O_RDONLY : mode === 'rw' ? constants.O_RDWR : constants.O_WRONLY) |
    (before ? 0 : constants.O_CREAT | constants.O_EXCL);
  const fh = await open(abs, flags, 0o644);
  try {
    const st = await fh.stat();
    if (!st.isFile()) throw new Refused(`is ${kind(st)}, not a regular file`);
    if (before && (st.ino !== before.ino || st.dev !== before.dev))
      throw new Refused('changed while it was opened');
    await verifyOpened(fh, abs, root, st);
    return { fh, st };
  } catch (e) {
    await fh.close().catch(() => undefined);
    throw e;
  }
}

/**
 * Where an open descriptor really is must be inside the workspace's real path: a directory swapped for
 * a link after the guard would have led the open outside. Linux names the descriptor's path in
 * /proc/self/fd; elsewhere the path is resolved again and must be the same file. Fails closed.
 */
export async function verifyOpened(fh: FileHandle, abs: string, root: string, st: Stats): Promise<void> {
  const realRoot = await realpath(root);
  let where: string | undefined;
  try {
    where = await readlink(`/proc/self/fd/${fh.fd}`);
  } catch {
    where = undefined;
  }
  if (where === undefined) {
    where = await realpath(abs);
    const again = await stat(where);
    if (again.ino !== st.ino || again.dev !== st.dev) throw new Refused('changed while it was opened');
  }
  if (!inside(where, realRoot)) throw new Refused('leads outside the workspace (it was swapped for a link)');
}
