import { lstat, realpath } from 'node:fs/promises';
import path from 'node:path';

type Json = Record<string, unknown>;
export type Checked = { ok: true; value: Json } | { ok: false; error: string };

/** A parameter of this JSON Schema format is a path inside the workspace (`{type: string, format: path}`). */
export const PATH_FORMAT = 'path';

// C0 controls and DEL, except tab, newline and carriage return (text a model may well write). NUL would
// also make spawn throw; the others reach terminals and logs of whoever reads the tool's output.
// biome-ignore lint/suspicious/noControlCharactersInRegex: finding control characters is the point
const CONTROL = /[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f]/;

/**
 * Every string in the model's arguments (nested ones too): no control characters, at most `maxBytes`
 * each. Any other argument (numbers, arrays, objects) is capped by its JSON size, once, at the top:
 * a nested value over the cap makes its argument so too. The first fault names its place.
 */
export function checkValues(args: Json, maxBytes: number): string | undefined {
  const tooLong = (at: string) => `${at}: longer than ${maxBytes} bytes`;
  const walk = (v: unknown, at: string): string | undefined => {
    if (typeof v === 'string') {
      const m = CONTROL.exec(v);
      if (m)
        return `${at}: control character U+${m[0].charCodeAt(0).toString(16).padStart(4, '0').toUpperCase()} is not allowed`;
      return Buffer.byteLength(v) > maxBytes ? tooLong(at) : undefined;
    }
    if (v && typeof v === 'object')
      for (const [k, x] of Object.entries(v)) {
        const e = Array.isArray(v) ? walk(x, `${at}[${k}]`) : (walk(k, `${at} key`) ?? walk(x, `${at}.${k}`));
        if (e) return e;
      }
    return undefined;
  };
  for (const [k, v] of Object.entries(args)) {
    const e = walk(v, k);
    if (e) return e;
    if (typeof v !== 'string' && Buffer.byteLength(JSON.stringify(v) ?? '') > maxBytes) return tooLong(k);
  }
  return undefined;
}

/** The names of a tool's parameters declared `format: path`. */
export function pathParameters(parameters: Json): string[] {
  const props = (parameters.properties ?? {}) as Record<string, { format?: unknown } | undefined>;
  return Object.entries(props)
    .filter(([, p]) => p?.format === PATH_FORMAT)
    .map(([k]) => k);
}

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

/** Every `format: path` argument checked and normalised; other arguments as they are. */
export async function resolvePaths(parameters: Json, args: Json, workspace: string): Promise<Checked> {
  const out = { ...args };
  for (const name of pathParameters(parameters)) {
    const v = out[name];
    if (v === undefined || v === null) continue;
    if (typeof v !== 'string') return { ok: false, error: `${name}: a path must be a string` };
    const r = await workspacePath(v, workspace);
    if (!r.ok) return { ok: false, error: `${name}: ${r.error}` };
    out[name] = r.rel;
  }
  return { ok: true, value: out };
}
