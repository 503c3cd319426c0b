import { z } from 'zod';
import type { FileRequest, FileResult } from '../../pup/runner/files.ts';

/**
 * The coding agent's guardrails (docs/runtime-model.md § Tools): built-in workspace file tools, run where the tools run (the
 * tool runner checks every path there), and a generic state probe of the workspace shown to the model
 * before each call: facts (files written, still there or gone, the last commands, the last errors),
 * never goal-specific checks. Pure: the turn does the I/O.
 */

export const WS_LIST = 'workspace_list';
export const WS_READ = 'workspace_read';
export const WS_WRITE = 'workspace_write';
export const WS_PATCH = 'workspace_patch';

const path = z.string().min(1, 'must not be empty').max(4096);
export const FILE_TOOLS = {
  [WS_LIST]: {
    description: 'List a directory of the workspace (relative path; "." is the workspace itself).',
    schema: z.object({ path: path.default('.') }),
  },
  [WS_READ]: {
    description: 'Read a text file of the workspace (relative path), up to max_bytes (64 KiB by default).',
    schema: z.object({
      path,
      max_bytes: z
        .number()
        .int()
        .positive()
        .max(1024 * 1024)
        .optional(),
    }),
  },
  [WS_WRITE]: {
    description:
      'Write (create or replace) a file of the workspace with content; create_dirs makes missing parent directories.',
    schema: z.object({ path, content: z.string(), create_dirs: z.boolean().optional() }),
  },
  [WS_PATCH]: {
    description:
      'Replace one exact occurrence of old with new in a file of the workspace (old must occur once).',
    schema: z.object({ path, old: z.string().min(1, 'must not be empty'), new: z.string() }),
  },
} as const;
export type FileToolName = keyof typeof FILE_TOOLS;
export const FILE_TOOL_NAMES = Object.keys(FILE_TOOLS) as FileToolName[];
export const isFileTool = (n: string): n is FileToolName => n in FILE_TOOLS;

/**
 * A file tool's checked arguments as the runner's request, in the workspace `root`. A write or patch
 * into .git is refused by the runner unless the agent declared `allowGit` (fileToolsAllowGit).
 */
export function fileRequest(
  name: FileToolName,
  a: Record<string, unknown>,
  root: string,
  allowGit = false,
): FileRequest {
  const p = String(a.path ?? '.');
  switch (name) {
    case WS_LIST:
      return { op: 'list', root, path: p };
    case WS_READ:
      return { op: 'read', root, path: p, ...(a.max_bytes ? { maxBytes: Number(a.max_bytes) } : {}) };
    case WS_WRITE:
      return {
        op: 'write',
        root,
        path: p,
        content: String(a.content),
        createDirs: a.create_dirs === true,
        allowGit,
      };
    case WS_PATCH:
      return { op: 'patch', root, path: p, old: String(a.old), new: String(a.new), allowGit };
  }
}

const KEEP = { written: 20, commands: 5, errors: 3 };
export const ProbeState = z.object({
  written: z.array(z.string()).default([]),
  commands: z.array(z.string()).default([]),
  errors: z.array(z.string()).default([]),
});
export type ProbeState = z.infer<typeof ProbeState>;
export const emptyProbe = (): ProbeState => ({ written: [], commands: [], errors: [] });

const last = <T>(xs: T[], n: number) => xs.slice(Math.max(0, xs.length - n));

/** The probe after a file tool ran: a path written or patched is remembered, a failure is an error. */
export function afterFileOp(p: ProbeState, name: FileToolName, path: string, r: FileResult): ProbeState {
  if (!r.ok)
    return { ...p, errors: last([...p.errors, `${name} ${path}: ${r.error}`.slice(0, 200)], KEEP.errors) };
  if (name !== WS_WRITE && name !== WS_PATCH) return p;
  return { ...p, written: last([...p.written.filter((w) => w !== path), path], KEEP.written) };
}

/** The probe after a declared tool ran: the command and how it ended; a failure is an error too. */
export function afterCommand(p: ProbeState, label: string, status: string, ok: boolean): ProbeState {
  const line = `${label} → ${status}`.slice(0, 200);
  return {
    ...p,
    commands: last([...p.commands, line], KEEP.commands),
    errors: ok ? p.errors : last([...p.errors, line], KEEP.errors),
  };
}

/** The probe as the model reads it (at most `maxChars`), or undefined while there is nothing to say. */
export function probeMessage(p: ProbeState, exists: boolean[], maxChars = 1500): string | undefined {
  if (!p.written.length && !p.commands.length && !p.errors.length) return undefined;
  const present = p.written.filter((_, i) => exists[i]);
  const missing = p.written.filter((_, i) => exists[i] === false);
  const lines = ['[workspace state, facts only]'];
  if (p.written.length) {
    lines.push(`files written this turn: ${p.written.join(', ')}`);
    lines.push(`  still present: ${present.join(', ') || '(none)'}`);
    if (missing.length) lines.push(`  now missing: ${missing.join(', ')}`);
  }
  if (p.commands.length) lines.push(`last commands: ${p.commands.join('; ')}`);
  if (p.errors.length) lines.push(`recent errors: ${p.errors.join('; ')}`);
  const text = lines.join('\n');
  return text.length > maxChars ? `${text.slice(0, maxChars - 1)}…` : text;
}
