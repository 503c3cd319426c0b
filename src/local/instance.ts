import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { z } from 'zod';

/** Where local instances keep their state, logs and data (override with HOLT_HOME). */
export function holtHome(): string {
  return process.env.HOLT_HOME ?? join(homedir(), '.holt');
}

export function instanceDir(name: string): string {
  return join(holtHome(), 'instances', name);
}

export const INSTANCE_NAME = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;

export const ComponentState = z.object({
  name: z.string(),
  kind: z.enum(['store', 'orchestrator', 'agent', 'controller', 'worker', 'tools']),
  role: z.string().optional(),
  pid: z.number().int().optional(),
  status: z.enum(['starting', 'running', 'restarting', 'stopped', 'failed']),
  restarts: z.number().int().default(0),
  healthPort: z.number().int().optional(),
  logFile: z.string(),
  lastExit: z.string().optional(),
});
export type ComponentState = z.infer<typeof ComponentState>;

export const InstanceState = z.object({
  name: z.string(),
  workspace: z.string(),
  holtFile: z.string(),
  supervisorPid: z.number().int(),
  startedAt: z.number().int(),
  status: z.enum(['starting', 'running', 'degraded', 'stopping', 'stopped', 'failed']),
  error: z.string().optional(),
  redisUrl: z.string().optional(),
  natsUrl: z.string().optional(),
  postgresUrl: z.string().optional(),
  /** The living agents' ingress (the orchestrator's), when an agent lives. */
  ingressUrl: z.string().optional(),
  components: z.array(ComponentState).default([]),
  /** Store servers started for this instance (pid per name), so `down` can prove they are gone. */
  stores: z.array(z.object({ name: z.string(), pid: z.number().int() })).default([]),
});
export type InstanceState = z.infer<typeof InstanceState>;

/** The instance's ingress tokens, hashed (`holt token`; the orchestrator re-reads it). */
export function ingressTokensFile(name: string): string {
  return join(instanceDir(name), 'ingress-tokens.json');
}

export function stateFile(name: string): string {
  return join(instanceDir(name), 'state.json');
}

/** Atomic replace, so a reader never sees half a file. */
export function writeState(s: InstanceState): void {
  const dir = instanceDir(s.name);
  mkdirSync(dir, { recursive: true });
  const tmp = join(dir, `.state.${process.pid}.tmp`);
  // 0600: it holds the admin URLs of the stores (the CLI reads them).
  writeFileSync(tmp, `${JSON.stringify(s, null, 2)}\n`, { mode: 0o600 });
  renameSync(tmp, stateFile(s.name));
}

export function readState(name: string): InstanceState | undefined {
  const f = stateFile(name);
  if (!existsSync(f)) return undefined;
  try {
    return InstanceState.parse(JSON.parse(readFileSync(f, 'utf8')));
  } catch {
    return undefined;
  }
}

export function listInstances(): InstanceState[] {
  const root = join(holtHome(), 'instances');
  if (!existsSync(root)) return [];
  return readdirSync(root)
    .map((n) => readState(n))
    .filter((s): s is InstanceState => s !== undefined)
    .sort((a, b) => a.name.localeCompare(b.name));
}

export function isAlive(pid: number | undefined): boolean {
  if (!pid) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * Whether `pid` is alive and still the process we started: its command line contains `marker`. A pid
 * from an old state file may since belong to something else, which must never be signalled.
 */
export function isOurProcess(pid: number | undefined, marker: string): boolean {
  if (!isAlive(pid)) return false;
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes(marker);
  } catch {
    // no /proc (not Linux): fall back to liveness
    return true;
  }
}

/** The supervisor of this instance is running (identity-checked, not just a live pid). */
export function supervisorAlive(s: InstanceState): boolean {
  return isOurProcess(s.supervisorPid, '__supervise');
}

/** The instance as a user sees it: a dead supervisor means stopped, whatever the file says. */
export function effectiveStatus(s: InstanceState): InstanceState['status'] {
  if (!supervisorAlive(s)) return s.status === 'failed' ? 'failed' : 'stopped';
  return s.status;
}
