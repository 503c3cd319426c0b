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

/** Closes the ways to a remote Holt (its port-forwards), if any were opened. */
export async function closeRemoteTarget(): Promise<void> {
  const r = remote;
  const p = remotePg;
  remote = undefined;
  remotePg = undefined;
  await Promise.all([r?.close(), p?.close()]);
}

export function remoteTarget(): BlackboardTarget | undefined {
  return remote;
}

/** Where the Postgres commands (work, memory, life) read and write a Holt in a cluster. */
export interface PostgresTarget {
  name: string;
  url: string;
  ssl?: { ca: string; servername: string };
}
let remotePg: (PostgresTarget & { close(): Promise<void> }) | undefined;

/** `--kube` for work, memory and life: the Holt's Postgres (through its port-forward) instead of a local one. */
export function useRemotePostgres(t: PostgresTarget & { close(): Promise<void> }): void {
  remotePg = t;
}

export function remotePostgres(): PostgresTarget | undefined {
  return remotePg;
}

export function positiveInt(flag: string, value: string): number {
  const r = z.coerce.number().int().positive().safeParse(value);
  if (!r.success) throw new CliError(`${flag}: "${value}" must be a positive whole number`, EXIT.usage);
  return r.data;
}
