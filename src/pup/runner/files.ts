import { lstat, mkdir, readdir, realpath } from 'node:fs/promises';
import path from 'node:path';
import { z } from 'zod';
import { openInside, Refused } from './open-inside.ts';
import { gitPathProblem, inside, workspacePath } from './workspace-path.ts';

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
    /** The agent declared fileToolsAllowGit: it may write in .git (hooks, config). */
    allowGit: z.boolean().default(false),
  }),
  z.object({
    op: z.literal('patch'),
    root: z.string().min(1),
    path: rel,
    old: z.string().min(1),
    new: z.string(),
    allowGit: z.boolean().default(false),
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
 * leads out through a symbolic link is refused (workspace-path.ts), here where the operation runs; a
 * file is opened as hostile input (open-inside.ts: regular files only, no link followed, size checked
 * before reading); a write into .git needs allowGit. Never throws: every outcome is a result the model
 * is shown.
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
    if ((req.op === 'write' || req.op === 'patch') && !req.allowGit) {
      const g = gitPathProblem(w.rel);
      if (g) return fail(`${w.rel}: ${g}`);
    }
    switch (req.op) {
      case 'list': {
        const entries = await readdir(abs, { withFileTypes: true });
        // A directory swapped for a link while it was read: its names are not shown.
        if (!inside(await realpath(abs), await realpath(req.root)))
          return fail(`${w.rel}: leads outside the workspace (it was swapped for a link)`);
        const names = entries.map((e) => (e.isDirectory() ? `${e.name}/` : e.name)).sort();
        const shown = names.slice(0, MAX_LISTED);
        const more = names.length > shown.length ? `\n… and ${names.length - shown.length} more` : '';
        return { ok: true, output: shown.length ? shown.join('\n') + more : '(empty directory)' };
      }
      case 'read': {
        const { fh, st } = await openInside(req.root, w.rel, 'read');
        try {
          // Only what is shown is read: a sparse file of gigabytes costs maxBytes.
          const buf = Buffer.alloc(Math.min(req.maxBytes, st.size));
          const { bytesRead } = await fh.read(buf, 0, buf.length, 0);
          const head = buf.subarray(0, bytesRead);
          if (head.subarray(0, 8192).includes(0)) return fail(`${w.rel}: a binary file (not shown)`);
          const text = head.toString('utf8');
          return {
            ok: true,
            output:
              st.size > req.maxBytes ? `${text}\n…[truncated at ${req.maxBytes} of ${st.size} bytes]` : text,
          };
        } finally {
          await fh.close();
        }
      }
      case 'write': {
        const bytes = Buffer.from(req.content);
        if (bytes.length > MAX_FILE_BYTES) return fail(`content over ${MAX_FILE_BYTES} bytes`);
        if (req.createDirs) {
          await mkdir(path.dirname(abs), { recursive: true });
          // The directories were made where the path led then; it must still lead inside.
          const again = await workspacePath(w.rel, req.root);
          if (!again.ok) return fail(`${w.rel}: ${again.error}`);
        }
        const { fh } = await openInside(req.root, w.rel, 'write');
        try {
          await fh.truncate(0);
          await fh.write(bytes, 0, bytes.length, 0);
        } finally {
          await fh.close();
        }
        return { ok: true, output: `wrote ${bytes.length} bytes to ${w.rel}` };
      }
      case 'patch': {
        const { fh, st } = await openInside(req.root, w.rel, 'rw');
        try {
          if (st.size > MAX_FILE_BYTES)
            return fail(`${w.rel}: over ${MAX_FILE_BYTES} bytes (${st.size}); not patched`);
          // One byte more than fstat said: a file that grew meanwhile is read to its cap, not beyond.
          const buf = Buffer.alloc(Math.min(st.size, MAX_FILE_BYTES) + 1);
          const { bytesRead } = await fh.read(buf, 0, buf.length, 0);
          if (bytesRead > MAX_FILE_BYTES) return fail(`${w.rel}: over ${MAX_FILE_BYTES} bytes; not patched`);
          const text = buf.subarray(0, bytesRead).toString('utf8');
          const at = text.indexOf(req.old);
          if (at < 0) return fail(`${w.rel}: the text to replace was not found`);
          if (text.indexOf(req.old, at + 1) >= 0)
            return fail(`${w.rel}: the text to replace occurs more than once; give more of it`);
          const next = Buffer.from(text.slice(0, at) + req.new + text.slice(at + req.old.length));
          if (next.length > MAX_FILE_BYTES) return fail(`the result would be over ${MAX_FILE_BYTES} bytes`);
          await fh.truncate(0);
          await fh.write(next, 0, next.length, 0);
          return { ok: true, output: `patched ${w.rel} (${req.old.length} → ${req.new.length} characters)` };
        } finally {
          await fh.close();
        }
      }
    }
  } catch (e) {
    if (e instanceof Refused) return fail(`${'path' in req ? req.path : ''}: ${e.message}`);
    const err = e as NodeJS.ErrnoException;
    // The code says it without the absolute path the message carries (the model knows relative ones).
    return fail(`${'path' in req ? req.path : ''}: ${err.code ?? err.message}`);
  }
}
