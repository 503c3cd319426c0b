import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, openSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import type { Writable } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { credentialHandoff } from '../../common/credentials.ts';
import { LLM_KEY_VARS, STORE_URL_VARS } from '../../common/secrets.ts';
import {
  effectiveStatus,
  INSTANCE_NAME,
  instanceDir,
  isAlive,
  listInstances,
  readState,
  supervisorAlive,
} from '../../local/instance.ts';
import { CliError, EXIT, err, out, paint, progress } from '../output.ts';
import { positiveInt, readHoltFile, workspaceOf } from '../resolve.ts';

const CLI = join(dirname(fileURLToPath(import.meta.url)), '..', 'main.ts');

export interface UpOptions {
  file: string;
  name?: string;
  force?: boolean;
  timeout: string;
  /** false (--no-containers): agents' tools run on this machine. */
  containers?: boolean;
}

function nextDefaultName(): string {
  const used = listInstances()
    .map((s) => /^default-(\d+)$/.exec(s.name)?.[1])
    .filter((n): n is string => n !== undefined)
    .map(Number);
  return `default-${used.length ? Math.max(...used) + 1 : 1}`;
}

export async function up(opts: UpOptions): Promise<void> {
  const file = resolve(opts.file);
  const timeoutMs = positiveInt('--timeout', opts.timeout) * 1000;
  if (!existsSync(file))
    throw new CliError(`${opts.file} not found: write a Holt file or pass -f <file>`, EXIT.notFound);
  const holt = readHoltFile(file);
  for (const w of holt.warnings) err(paint('yellow', `warning: ${w}`, process.stderr));
  const name = opts.name ?? holt.name ?? nextDefaultName();
  if (!INSTANCE_NAME.test(name) || name.length > 63)
    throw new CliError(
      `invalid instance name '${name}': use lowercase letters, digits and '-' (max 63)`,
      EXIT.usage,
    );
  const existing = readState(name);
  if (existing && supervisorAlive(existing))
    throw new CliError(
      `instance '${name}' already exists and is ${effectiveStatus(existing)}: \`holt down --name ${name}\` first`,
    );
  const workspace = holt.holt.workspace.path
    ? resolve(dirname(file), holt.holt.workspace.path)
    : workspaceOf(dirname(file));
  const clash = listInstances().find((s) => s.workspace === workspace && supervisorAlive(s));
  if (clash && !opts.force)
    throw new CliError(
      `workspace in use by instance '${clash.name}': use --force to run another instance on it`,
    );

  const dir = instanceDir(name);
  mkdirSync(dir, { recursive: true });
  const logFile = join(dir, 'supervisor.log');
  // The supervisor outlives this command and tools can read its /proc/<pid>/environ: the model key
  // and store URLs of this shell reach it on a descriptor instead (then the components, the same way).
  const secretVars = [...LLM_KEY_VARS, ...STORE_URL_VARS, holt.holt.llm?.apiKeyEnv];
  const daemonEnv = { ...process.env };
  const handed: Record<string, string> = {};
  for (const k of secretVars)
    if (k && daemonEnv[k] !== undefined) {
      handed[k] = daemonEnv[k] as string;
      delete daemonEnv[k];
    }
  const handoff = credentialHandoff(handed);
  const fd = openSync(logFile, 'a');
  const child = spawn(
    process.execPath,
    [
      '--no-warnings=ExperimentalWarning',
      CLI,
      '__supervise',
      '--name',
      name,
      '--file',
      file,
      '--workspace',
      workspace,
      '--ready-timeout',
      String(timeoutMs),
      ...(opts.containers === false ? ['--no-containers'] : []),
    ],
    { detached: true, stdio: ['ignore', fd, fd, 'pipe'], env: { ...daemonEnv, ...handoff.env } },
  );
  (child.stdio[3] as Writable | null)?.on('error', () => undefined).end(handoff.payload);
  child.unref();

  const p = progress(`Starting instance '${name}'`);
  // A backstop behind the supervisor's own timeout, which starts once its stores are up and it adds the
  // components: so the backstop starts again then (a slow start of the stores must not cut it short).
  let deadline = Date.now() + timeoutMs + 15_000;
  let componentsSeen = false;
  for (;;) {
    await sleep(200);
    const s = readState(name);
    if (s && s.supervisorPid === child.pid) {
      if (!componentsSeen && s.components.length) {
        componentsSeen = true;
        deadline = Math.max(deadline, Date.now() + timeoutMs + 15_000);
      }
      const pending = s.components.filter((c) => c.status !== 'running').map((c) => c.name);
      p.update(pending.length ? `(waiting for ${pending.join(', ')})` : '');
      if (s.status === 'running') {
        p.done();
        out(
          `${paint('green', '✓')} Instance '${name}' started successfully (${s.components.filter((c) => c.kind !== 'orchestrator' && c.kind !== 'tools').length} agents ready)`,
        );
        out(`  workspace: ${workspace}`);
        out(`  logs:      ${join(dir, 'logs')}   (holt logs <role|orchestrator>)`);
        out(`  next:      holt forage --goal "..." --watch`);
        return;
      }
      if (s.status === 'failed' || (s.status === 'stopped' && !isAlive(child.pid))) {
        p.done();
        throw new CliError(
          `instance '${name}' failed to start: ${s.error ?? 'unknown error'}\n${tail(logFile)}`,
        );
      }
    } else if (!isAlive(child.pid)) {
      p.done();
      throw new CliError(`instance '${name}' failed to start:\n${tail(logFile)}`);
    }
    if (Date.now() > deadline) {
      p.done();
      process.kill(child.pid!, 'SIGTERM');
      throw new CliError(
        `instance '${name}' not ready after ${opts.timeout}s; rolled back (see ${logFile})`,
        EXIT.timeout,
      );
    }
  }
}

function tail(file: string, lines = 15): string {
  try {
    return readFileSync(file, 'utf8').trimEnd().split('\n').slice(-lines).join('\n');
  } catch {
    return '';
  }
}
