import { styleText } from 'node:util';

/** Exit codes scripts can rely on (documented in `holt --help`). */
export const EXIT = {
  ok: 0,
  error: 1,
  usage: 2,
  notFound: 3,
  dirty: 4,
  timeout: 5,
} as const;

/** An error for the user: a message that says what to do, and an exit code. */
export class CliError extends Error {
  readonly code: number;
  constructor(message: string, code: number = EXIT.error) {
    super(message);
    this.name = 'CliError';
    this.code = code;
  }
}

type Style = Parameters<typeof styleText>[0];

/** Colour only on a terminal (styleText checks the stream, NO_COLOR and FORCE_COLOR). */
export function paint(style: Style, text: string, stream: NodeJS.WriteStream = process.stdout): string {
  return styleText(style, text, { stream });
}

export function out(line = ''): void {
  process.stdout.write(`${line}\n`);
}

export function err(line: string): void {
  process.stderr.write(`${line}\n`);
}

/** A spinner on stderr while waiting, only on a terminal; silent when piped. */
export function progress(label: string): { update(text: string): void; done(final?: string): void } {
  const tty = process.stderr.isTTY === true;
  const frames = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];
  let text = label;
  let i = 0;
  const timer = tty
    ? setInterval(() => {
        process.stderr.write(`\r\x1b[2K${frames[i++ % frames.length]} ${text}`);
      }, 80)
    : undefined;
  timer?.unref();
  return {
    update(t: string) {
      text = `${label} ${t}`;
    },
    done(final?: string) {
      if (timer) {
        clearInterval(timer);
        process.stderr.write('\r\x1b[2K');
      }
      if (final) err(final);
    },
  };
}

/** Fixed-width columns: pads every cell but the last. */
export function table(rows: string[][]): string[] {
  const widths: number[] = [];
  for (const r of rows) for (const [i, c] of r.entries()) widths[i] = Math.max(widths[i] ?? 0, c.length);
  return rows.map((r) =>
    r
      .map((c, i) => (i === r.length - 1 ? c : c.padEnd(widths[i] ?? 0)))
      .join('  ')
      .trimEnd(),
  );
}

export function age(ms: number, now = Date.now()): string {
  const s = Math.max(0, Math.floor((now - ms) / 1000));
  if (s < 60) return `${s}s ago`;
  if (s < 3600) return `${Math.floor(s / 60)}m ago`;
  if (s < 86400) return `${Math.floor(s / 3600)}h ago`;
  return `${Math.floor(s / 86400)}d ago`;
}

export function uptime(ms: number): string {
  const s = Math.floor(ms / 1000);
  const h = Math.floor(s / 3600);
  const m = Math.floor((s % 3600) / 60);
  if (h) return `${h}h ${m}m`;
  if (m) return `${m}m ${s % 60}s`;
  return `${s}s`;
}
