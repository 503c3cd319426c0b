import type { ChildProcessWithoutNullStreams } from 'node:child_process';

/** The one-time link `holt console` prints, once it has printed it (it exits: rejected with its output). */
export function consoleLink(served: ChildProcessWithoutNullStreams): Promise<string> {
  return new Promise<string>((resolveUrl, reject) => {
    let text = '';
    served.stdout.on('data', (c: Buffer) => {
      text += c.toString();
      const m = /http:\/\/127\.0\.0\.1:\d+\/\?token=\S+/.exec(text);
      if (m) resolveUrl(m[0]);
    });
    served.once('exit', (code) => reject(new Error(`holt console exited ${code}: ${text}`)));
  });
}
