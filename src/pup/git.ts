import { execFile } from 'node:child_process';

/** Whether `rev` names an object in the workspace's repository (`git cat-file -e`, no shell). */
export function commitExists(workspace: string, rev: string): Promise<{ ok: boolean; detail: string }> {
  // An option-looking payload would be read by git as a flag.
  if (!rev || rev.startsWith('-') || /\s/.test(rev)) {
    return Promise.resolve({
      ok: false,
      detail: `not a commit reference: ${JSON.stringify(rev.slice(0, 80))}`,
    });
  }
  return new Promise((resolve) => {
    execFile('git', ['cat-file', '-e', rev], { cwd: workspace, timeout: 30_000 }, (err, _out, stderr) => {
      resolve(err ? { ok: false, detail: (stderr || err.message).trim() } : { ok: true, detail: '' });
    });
  });
}
