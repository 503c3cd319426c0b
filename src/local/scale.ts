import { existsSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { z } from 'zod';
import { type AgentSpec, isScalable } from '../api/agent.ts';
import { instanceDir } from './instance.ts';

// `holt scale <role> N` writes the wanted worker counts here and sends SIGHUP to the supervisor.
const Scale = z.record(z.string(), z.number().int().min(0).max(1000));
export type Scale = z.infer<typeof Scale>;

export const scaleFile = (name: string) => join(instanceDir(name), 'scale.json');

export function readScale(name: string): Scale {
  const f = scaleFile(name);
  if (!existsSync(f)) return {};
  const r = Scale.safeParse(JSON.parse(readFileSync(f, 'utf8')));
  return r.success ? r.data : {};
}

export function writeScale(name: string, role: string, workers: number): void {
  const next = { ...readScale(name), [role]: workers };
  const tmp = `${scaleFile(name)}.${process.pid}.tmp`;
  writeFileSync(tmp, `${JSON.stringify(next, null, 2)}\n`);
  renameSync(tmp, scaleFile(name));
}

/** Worker processes of a scalable agent: `holt scale` wins, then replicas, then Holt's max_concurrent. */
export function workerCount(
  agent: Pick<AgentSpec, 'replicas' | 'strategy' | 'worker'>,
  scaled?: number,
): number {
  if (!isScalable(agent)) return 0;
  if (scaled !== undefined) return scaled;
  return agent.replicas > 1 ? agent.replicas : (agent.worker?.maxConcurrent ?? 1);
}

export const workerName = (role: string, i: number) => `${role}-worker-${i}`;

/** Of the supervisor's component names, the worker processes of `role` (not their tools, no other role's). */
export function workersOf(names: string[], role: string): { name: string; index: number }[] {
  const prefix = `${role}-worker-`;
  return names
    .filter((x) => x.startsWith(prefix) && /^\d+$/.test(x.slice(prefix.length)))
    .map((name) => ({ name, index: Number(name.slice(prefix.length)) }));
}
