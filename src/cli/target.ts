import type { RedisOptions } from 'ioredis';
import { z } from 'zod';
import { CliError, EXIT } from './output.ts';

// Kept apart from resolve.ts, which reads Holt files: the CLI's entry point imports only this, so a
// command that needs neither (`holt pup`) never loads the Holt file's parser and schemas.

/** Where the blackboard commands (forage, watch, hoard, questions, answer) read and write. */
export interface BlackboardTarget {
  name: string;
  redisUrl: string;
  /** Connection options beyond the URL (TLS to a Holt in a cluster). */
  redisOptions?: RedisOptions;
  /** The local git workspace (forage checks it is clean); none for a Holt in a cluster. */
  workspace?: string;
}

let remote: (BlackboardTarget & { close(): Promise<void> }) | undefined;

/** `--kube`: the commands use this Holt in a cluster instead of a local instance. */
export function useRemoteTarget(t: BlackboardTarget & { close(): Promise<void> }): void {
  remote = t;
}

/** Closes the way to a remote Holt (its port-forward), if one was opened. */
export async function closeRemoteTarget(): Promise<void> {
  const r = remote;
  remote = undefined;
  await r?.close();
}

export function remoteTarget(): BlackboardTarget | undefined {
  return remote;
}

export function positiveInt(flag: string, value: string): number {
  const r = z.coerce.number().int().positive().safeParse(value);
  if (!r.success) throw new CliError(`${flag}: "${value}" must be a positive whole number`, EXIT.usage);
  return r.data;
}
