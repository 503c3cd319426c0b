import { createReadStream, existsSync, readFileSync, statSync, watchFile } from 'node:fs';
import { CliError, EXIT, out } from '../output.ts';
import { positiveInt, resolveInstance } from '../resolve.ts';

export async function logs(
  target: string,
  opts: { name?: string; follow?: boolean; lines: string },
): Promise<void> {
  const s = resolveInstance(opts.name, { mustRun: false });
  // A name first; a role means its pup, not the tool runner beside it.
  const c =
    s.components.find((x) => x.name === target) ??
    s.components.find((x) => x.role === target && x.kind !== 'tools');
  if (!c) {
    const names = s.components.map((x) => x.name).join(', ');
    throw new CliError(`no component '${target}' in instance '${s.name}' (known: ${names})`, EXIT.notFound);
  }
  if (!existsSync(c.logFile)) throw new CliError(`no log yet for ${target} (${c.logFile})`, EXIT.notFound);
  const n = positiveInt('--lines', opts.lines);
  const text = readFileSync(c.logFile, 'utf8').trimEnd();
  if (text) out(text.split('\n').slice(-n).join('\n'));
  if (!opts.follow) return;
  let pos = statSync(c.logFile).size;
  await new Promise<void>((resolve) => {
    watchFile(c.logFile, { interval: 250 }, (cur) => {
      if (cur.size < pos) pos = 0;
      if (cur.size > pos) {
        createReadStream(c.logFile, { start: pos, end: cur.size - 1 }).pipe(process.stdout, { end: false });
        pos = cur.size;
      }
    });
    process.once('SIGINT', () => resolve());
  });
}
