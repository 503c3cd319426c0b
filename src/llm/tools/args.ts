import { workspacePath } from '../../pup/runner/workspace-path.ts';

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
