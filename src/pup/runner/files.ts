import { lstat, mkdir, readdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { z } from 'zod';
import { workspacePath } from './workspace-path.ts';

/** The most a read returns, and the largest file a write or a patch makes. */
export const MAX_FILE_BYTES = 1024 * 1024;
const MAX_LISTED = 500;

const rel = z.string().max(4096);
/**
 * A workspace file operation, as the built-in file tools ask for it. `root` is the workspace where the
 * operation runs (the runner's view of it); every path is relative to it and checked there.
 */
export const FileRequest = z.discriminatedUnion('op', [
  z.object({ op: z.literal('list'), root: z.string().min(1), path: rel.default('.') }),
  z.object({
    op: z.literal('read'),
    root: z.string().min(1),
    path: rel,
    maxBytes: z
      .number()
      .int()
      .positive()
      .max(MAX_FILE_BYTES)
      .default(64 * 1024),
  }),
  z.object({
    op: z.literal('write'),
    root: z.string().min(1),
    path: rel,
    content: z.string(),
    createDirs: z.boolean().default(false),
  }),
  z.object({
    op: z.literal('patch'),
    root: z.string().min(1),
    path: rel,
    old: z.string().min(1),
    new: z.string(),
  }),
  /** Which of `paths` exist (the state probe's question). */
  z.object({ op: z.literal('exists'), root: z.string().min(1), paths: z.array(rel).max(100) }),
]);
export type FileRequest = z.input<typeof FileRequest>;

export const FileResult = z.union([
  z.object({ ok: z.literal(true), output: z.string(), exists: z.array(z.boolean()).optional() }),
  z.object({ ok: z.literal(false), error: z.string() }),
]);
export type FileResult = z.infer<typeof FileResult>;

const fail = (error: string): FileResult => ({ ok: false, error });

/**
 * Runs one file operation inside the workspace. A path that is absolute, has `..`, starts with `-` or
 * leads out through a symbolic link is refused (workspace-path.ts), here where the operation runs. Never
 * throws: every outcome is a result the model is shown.
 */
export async function fileOp(input: FileRequest): Promise<FileResult> {
  const parsed = FileRequest.safeParse(input);
  if (!parsed.success) return fail(parsed.error.issues[0]?.message ?? 'bad request');
  const req = parsed.data;
  try {
    if (req.op === 'exists') {
      const exists = await Promise.all(
        req.paths.map(async (p) => {
          const w = await workspacePath(p, req.root);
          return (
            w.ok &&
            (await lstat(path.join(req.root, w.rel)).then(
              () => true,
              () => false,
            ))
          );
        }),
      );
      return { ok: true, output: '', exists };
    }
    const w = await workspacePath(req.path, req.root);
    if (!w.ok) return fail(`${req.path}: ${w.error}`);
    const abs = path.join(req.root, w.rel);
    switch (req.op) {
      case 'list': {
        const entries = await readdir(abs, { withFileTypes: true });
        const names = entries.map((e) => (e.isDirectory() ? `${e.name}/` : e.name)).sort();
        const shown = names.slice(0, MAX_LISTED);
        const more = names.length > shown.length ? `\n… and ${names.length - shown.length} more` : '';
        return { ok: true, output: shown.length ? shown.join('\n') + more : '(empty directory)' };
      }
      case 'read': {
        const buf = await readFile(abs);
        if (buf.subarray(0, 8192).includes(0)) return fail(`${w.rel}: a binary file (not shown)`);
        const cut = buf.length > req.maxBytes;
        const text = buf.subarray(0, req.maxBytes).toString('utf8');
        return {
          ok: true,
          output: cut ? `${text}\n…[truncated at ${req.maxBytes} of ${buf.length} bytes]` : text,
        };
      }
      case 'write': {
        if (Buffer.byteLength(req.content) > MAX_FILE_BYTES)
          return fail(`content over ${MAX_FILE_BYTES} bytes`);
        if (req.createDirs) await mkdir(path.dirname(abs), { recursive: true });
        await writeFile(abs, req.content);
        return { ok: true, output: `wrote ${Buffer.byteLength(req.content)} bytes to ${w.rel}` };
      }
      case 'patch': {
        const text = await readFile(abs, 'utf8');
        const at = text.indexOf(req.old);
        if (at < 0) return fail(`${w.rel}: the text to replace was not found`);
        if (text.indexOf(req.old, at + 1) >= 0)
          return fail(`${w.rel}: the text to replace occurs more than once; give more of it`);
        const next = text.slice(0, at) + req.new + text.slice(at + req.old.length);
        if (Buffer.byteLength(next) > MAX_FILE_BYTES)
          return fail(`the result would be over ${MAX_FILE_BYTES} bytes`);
        await writeFile(abs, next);
        return { ok: true, output: `patched ${w.rel} (${req.old.length} → ${req.new.length} characters)` };
      }
    }
  } catch (e) {
    const err = e as NodeJS.ErrnoException;
    // The code says it without the absolute path the message carries (the model knows relative ones).
    return fail(`${'path' in req ? req.path : ''}: ${err.code ?? err.message}`);
  }
}
