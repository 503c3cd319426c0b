import { type ChildProcess, spawn } from 'node:child_process';
import { join, resolve } from 'node:path';
import { eventually } from '../../../test/harness/wait.ts';

/** The MCP servers the tests run: the reference servers from npm, and our tiny one (fixtures/). */
const ROOT = resolve(import.meta.dirname, '../../..');
export const EVERYTHING = join(ROOT, 'node_modules/.bin/mcp-server-everything');
export const EVERYTHING_JS = join(ROOT, 'node_modules/@modelcontextprotocol/server-everything/dist/index.js');
export const FILESYSTEM = join(ROOT, 'node_modules/.bin/mcp-server-filesystem');
export const TINY = join(import.meta.dirname, 'fixtures/tiny-server.mjs');
export const AUTH_SERVER = join(import.meta.dirname, 'fixtures/auth-server.mjs');

/** A node script that says `listening` on stderr once it serves. */
export async function listening(
  argv: string[],
  env: Record<string, string>,
  what: string,
): Promise<ChildProcess> {
  const child = spawn(process.execPath, argv, {
    env: { PATH: process.env.PATH ?? '', ...env },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let err = '';
  child.stderr!.on('data', (b: Buffer) => {
    err += b.toString();
  });
  await eventually(`${what} listening`, () => /listening|running/i.test(err), { describe: () => err });
  return child;
}

/** server-everything in one of its HTTP modes, listening on `port` of 127.0.0.1 (its PORT variable). */
export const httpEverything = (mode: 'streamableHttp' | 'sse', port: number) =>
  listening([EVERYTHING_JS, mode], { PORT: String(port) }, `server-everything ${mode}`);

export const stopChild = (c: ChildProcess) =>
  new Promise<void>((r) => {
    if (c.exitCode !== null || c.signalCode !== null) return r();
    c.once('exit', () => r());
    c.kill('SIGKILL');
  });
