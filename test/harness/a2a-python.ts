import { execFile } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { cacheDir, MissingBinaryError } from './bins.ts';

/**
 * The official A2A Python SDK's client (a2a-sdk, installed by scripts/setup/a2a-python.sh) running one
 * step of test/fixtures/a2a/client.py against an A2A server: what the SDK returned, as JSON.
 */

const CLIENT = join(import.meta.dirname, '..', 'fixtures', 'a2a', 'client.py');

/** The venv's python (its current.env), or $A2A_PYTHON. */
export function a2aPython(): string {
  const explicit = process.env.A2A_PYTHON;
  if (explicit) return explicit;
  const envFile = join(cacheDir(), 'a2a-python', 'current.env');
  if (existsSync(envFile)) {
    const m = /^A2A_PYTHON=(.+)$/m.exec(readFileSync(envFile, 'utf8'));
    if (m?.[1] && existsSync(m[1].trim())) return m[1].trim();
  }
  throw new MissingBinaryError('a2a-sdk (python)', [envFile]);
}

export interface A2AEvent {
  kind: 'task' | 'status' | 'artifact' | string;
  state?: string;
  text?: string;
  name?: string;
  id?: string;
  artifacts?: { name: string; text: string }[];
}
export interface A2ATaskJson {
  id: string;
  context: string;
  state: string;
  status_text: string;
  artifacts: { name: string; text: string }[];
  history: string[];
}
export type A2AClientOut = Record<string, unknown> & {
  error?: string;
  message?: string;
  events?: A2AEvent[];
};

/** Runs `client.py step ...args` with the agent's URL and token; its JSON answer. */
export async function a2aClient(
  base: string,
  token: string,
  step: string,
  args: string[] = [],
  version: '1.0' | '0.3' = '1.0',
): Promise<A2AClientOut> {
  const { stdout } = await promisify(execFile)(a2aPython(), [CLIENT, step, ...args], {
    env: { ...process.env, BASE: base, TOKEN: token, VERSION: version },
    timeout: 180_000,
  });
  return JSON.parse(stdout.trim().split('\n').at(-1) ?? '{}') as A2AClientOut;
}
