import { lstat, realpath } from 'node:fs/promises';
import path from 'node:path';

type Guarded = { ok: true; rel: string } | { ok: false; error: string };

/** Errors that mean "this part does not exist yet" (a tool may create it); any other is a refusal. */
const ABSENT = new Set(['ENOENT', 'ENOTDIR']);

/**
 * A model's path → the same path relative to the workspace, or why not. Lexical rules first (relative,
 * no `..`, no leading `-` that a command would take for an option), then symlinks: the deepest part of
 * the path that exists must resolve inside the workspace's real path, so a link cannot lead out. Fails
 * closed: an error it does not expect (a loop, no permission) refuses the path.
 */
export async function workspacePath(raw: string, workspace: string): Promise<Guarded> {
  try {
    return await guard(raw, workspace);
  } catch (e) {
    const err = e as NodeJS.ErrnoException;
    return { ok: false, error: `cannot be checked (${err.code ?? err.message})` };
  }
}

async function guard(raw: string, workspace: string): Promise<Guarded> {
  if (raw === '') return { ok: false, error: 'is empty' };
  if (raw.includes('\0')) return { ok: false, error: 'contains a NUL byte' };
  if (raw.startsWith('-')) return { ok: false, error: 'must not start with "-"' };
  if (path.isAbsolute(raw)) return { ok: false, error: 'must be relative to the workspace, not absolute' };
  if (raw.split(/[\\/]/).includes('..')) return { ok: false, error: 'must not contain ".."' };
  const rel = path.normalize(raw);
  const root = await realpath(workspace);
  let probe = path.join(root, rel);
  // Resolve the longest prefix that exists (a tool may create the rest, inside what exists).
  for (;;) {
    let real: string | undefined;
    try {
      real = await realpath(probe);
    } catch (e) {
      if (!ABSENT.has((e as NodeJS.ErrnoException).code ?? '')) throw e;
    }
    if (real !== undefined) {
      if (!inside(real, root))
        return { ok: false, error: 'leads outside the workspace (through a symbolic link)' };
      break;
    }
    // A link whose target does not exist yet would let a tool create a file outside.
    const st = await lstat(probe).catch((e: NodeJS.ErrnoException) => {
      if (ABSENT.has(e.code ?? '')) return undefined;
      throw e;
    });
    if (st?.isSymbolicLink()) return { ok: false, error: 'is a symbolic link to nowhere' };
    const up = path.dirname(probe);
    if (up === probe) break;
    probe = up;
  }
  return { ok: true, rel };
}

/** Whether the real path `p` is `root` or under it. */
export const inside = (p: string, root: string) =>
  p === root || p.startsWith(root.endsWith(path.sep) ? root : `${root}${path.sep}`);

/** Characters that HFS+ ignores in a name, so `.g\u200cit` is `.git` there (as git's own checks). */
const IGNORED = /[\u200b-\u200f\u202a-\u202e\u206a-\u206f\ufeff]/g;

/**
 * Why a write to `rel` would reach the repository's own files, or undefined: any component that is
 * `.git` in any case, or that a case-insensitive filesystem takes for it (`.GIT`, `.git.`, `.git `,
 * HFS+'s ignored characters, NTFS's short name `git~1`). Hooks and config there run programs.
 */
export function gitPathProblem(rel: string): string | undefined {
  for (const part of rel.split(/[\\/]/)) {
    const name = part
      .replace(IGNORED, '')
      .toLowerCase()
      .replace(/[. ]+$/, '');
    if (name === '.git' || /^git~\d+$/.test(name))
      return 'is inside the repository’s .git directory (its hooks and config run programs); the agent must declare fileToolsAllowGit to write there';
  }
  return undefined;
}
