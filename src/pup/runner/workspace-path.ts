import { lstat, realpath } from 'node:fs/promises';
import path from 'node:path';

/**
 * A model's path → the same path relative to the workspace, or why not. Lexical rules first (relative,
 * no `..`, no leading `-` that a command would take for an option), then symlinks: the deepest part of
 * the path that exists must resolve inside the workspace's real path, so a link cannot lead out.
 */
export async function workspacePath(
  raw: string,
  workspace: string,
): Promise<{ ok: true; rel: string } | { ok: false; error: string }> {
  if (raw === '') return { ok: false, error: 'is empty' };
  if (raw.startsWith('-')) return { ok: false, error: 'must not start with "-"' };
  if (path.isAbsolute(raw)) return { ok: false, error: 'must be relative to the workspace, not absolute' };
  if (raw.split(/[\\/]/).includes('..')) return { ok: false, error: 'must not contain ".."' };
  const rel = path.normalize(raw);
  const root = await realpath(workspace);
  let probe = path.join(root, rel);
  // Resolve the longest prefix that exists (a tool may create the rest, inside what exists).
  for (;;) {
    try {
      const real = await realpath(probe);
      if (real !== root && !real.startsWith(`${root}${path.sep}`))
        return { ok: false, error: 'leads outside the workspace (through a symbolic link)' };
      break;
    } catch {
      // A link whose target does not exist yet would let a tool create a file outside.
      if (
        await lstat(probe).then(
          (st) => st.isSymbolicLink(),
          () => false,
        )
      )
        return { ok: false, error: 'is a symbolic link to nowhere' };
      const up = path.dirname(probe);
      if (up === probe) break;
      probe = up;
    }
  }
  return { ok: true, rel };
}
