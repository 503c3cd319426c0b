import { z } from 'zod';

/**
 * The exit code of a runtime program (orchestrator, pup) that stops on a ConfigError: EX_CONFIG.
 * Supervisors tell it from a crash: restarting cannot fix a setting.
 */
export const EXIT_CONFIG = 78;

/** A configuration problem, reported to the user as one line that names the setting. */
export class ConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ConfigError';
  }
}

/** One line per issue, naming the variable: `HOLT_AGENT_COMMAND: must be a JSON array of strings`. */
export function formatIssues(error: z.ZodError): string {
  return error.issues.map((i) => `${i.path.join('.') || '(root)'}: ${i.message}`).join('; ');
}

/** Parses the process environment (or any string map) with a zod object schema. */
export function parseEnv<S extends z.ZodType>(schema: S, env: NodeJS.ProcessEnv = process.env): z.infer<S> {
  const r = schema.safeParse(env);
  if (!r.success) throw new ConfigError(`invalid configuration: ${formatIssues(r.error)}`);
  return r.data;
}

/** An env var holding a JSON array of strings (Holt's HOLT_AGENT_COMMAND format). */
export const jsonArgv = z
  .string()
  .transform((s, ctx) => {
    try {
      return JSON.parse(s) as unknown;
    } catch {
      ctx.addIssue({ code: 'custom', message: 'must be a JSON array of strings, e.g. ["/app/run.sh"]' });
      return z.NEVER;
    }
  })
  .pipe(z.array(z.string()).min(1, 'must be a non-empty JSON array of strings'));

/** Milliseconds from an env string ("250") with a default. */
export const envMs = (def: number) => z.coerce.number().int().nonnegative().default(def);

/**
 * A program's answer to a configuration error: one line on stderr (`prefix: message`, naming the
 * setting) and EXIT_CONFIG, which supervisors read as "do not restart in a loop". Anything else is
 * thrown on with its stack.
 */
export function configErrorExit(e: unknown, prefix: string): number {
  if (!(e instanceof ConfigError)) throw e;
  process.stderr.write(`${prefix}: ${e.message}\n`);
  return EXIT_CONFIG;
}
