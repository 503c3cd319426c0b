import { Command, CommanderError, Option } from 'commander';
import { VERSION } from './version.ts';

/** A setting read from the environment that is also a flag (`HOLT_BID_TIMEOUT_MS` ↔ `--bid-timeout-ms`). */
export interface EnvSetting {
  env: string;
  help: string;
  /** The flag's name without `--`; default: the variable's name without HOLT_, in kebab case. */
  flag?: string;
  /** A switch: bare `--flag` means true, `--flag=false` false. */
  optionalValue?: boolean;
}

export interface ProgramSpec {
  /** As users type it: `holt orchestrator`. */
  name: string;
  description: string;
  settings: EnvSetting[];
  /** Flags that are not settings (e.g. the pup's --execute-claim). */
  options?: Option[];
  /**
   * Positional arguments are accepted and ignored, with everything after the first of them (flags
   * included): the text says why. Without it, any argument is a usage error.
   */
  passThrough?: string;
  /** More help at the end (where the full reference is). */
  epilog?: string;
}

export type Parsed =
  | { run: true; env: NodeJS.ProcessEnv; opts: Record<string, string | boolean | undefined> }
  | { run: false; exitCode: number };

/** Settings that hold credentials: environment only, never a flag (a command line is visible in `ps`). */
export const secretsEpilog = (vars: string[]) =>
  `Environment only (they hold credentials): ${vars.join(', ')}.`;

export const flagOf = (s: EnvSetting) =>
  s.flag ??
  s.env
    .replace(/^HOLT_/, '')
    .toLowerCase()
    .replaceAll('_', '-');

/**
 * The command line of a runtime program through commander: `--help` and `--version` print and stop
 * (exit 0, nothing started), an unknown flag or argument is a usage error (exit 2), and every
 * setting may be given as a flag that wins over its environment variable. The program then reads
 * the returned environment as before, so its schema stays the one place settings are checked.
 */
export function parseProgram(
  spec: ProgramSpec,
  argv: string[],
  env: NodeJS.ProcessEnv,
  io: { out: (s: string) => void; err: (s: string) => void } = {
    out: (s) => process.stdout.write(s),
    err: (s) => process.stderr.write(s),
  },
): Parsed {
  const cmd = new Command(spec.name)
    .description(spec.description)
    .version(VERSION, '-V, --version', 'print the version and exit')
    .helpOption('-h, --help', 'print this help and exit')
    .allowExcessArguments(false)
    .exitOverride()
    .configureOutput({ writeOut: io.out, writeErr: io.err })
    .showHelpAfterError('(run with --help for usage)');
  if (spec.passThrough) cmd.argument('[args...]', spec.passThrough).passThroughOptions();
  for (const o of spec.options ?? []) cmd.addOption(o);
  for (const s of spec.settings)
    cmd.addOption(new Option(`--${flagOf(s)} ${s.optionalValue ? '[bool]' : '<value>'}`, s.help).env(s.env));
  if (spec.epilog) cmd.addHelpText('after', `\n${spec.epilog}`);
  try {
    cmd.parse(argv, { from: 'user' });
  } catch (e) {
    if (e instanceof CommanderError) return { run: false, exitCode: e.exitCode === 0 ? 0 : 2 };
    throw e;
  }
  const opts = cmd.opts<Record<string, string | boolean | undefined>>();
  const merged: NodeJS.ProcessEnv = { ...env };
  for (const s of spec.settings) {
    const key = flagOf(s).replace(/-([a-z0-9])/g, (_, c: string) => c.toUpperCase());
    const v = opts[key];
    if (typeof v === 'string' || typeof v === 'boolean') merged[s.env] = String(v);
  }
  return { run: true, env: merged, opts };
}
