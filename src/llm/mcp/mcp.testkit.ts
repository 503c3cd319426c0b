import { type ChildProcess, spawn } from 'node:child_process';
import { join, resolve } from 'node:path';
import { eventually } from '../../../test/harness/wait.ts';

/** The MCP servers the tests run: the reference servers from npm, and our tiny one (fixtures/). */
const ROOT = resolve(import.meta.dirname, '../../..');
export const EVERYTHING = join(ROOT, 'node_modules/.bin/mcp-server-everything');
export const EVERYTHING_JS = join(ROOT, 'node_modules/@modelcontextprotocol/server-everything/dist/index.js');
export const FILESYSTEM = join(ROOT, 'node_modules/.bin/mcp-server-filesystem');
export const TINY = join(import.meta.dirname, 'fixtures/tiny-server.mjs');

/** server-everything in one of its HTTP modes, listening on `port` of 127.0.0.1 (its PORT variable). */
export async function httpEverything(mode: 'streamableHttp' | 'sse', port: number): Promise<ChildProcess> {
  const child = spawn(process.execPath, [EVERYTHING_JS, mode], {
    env: { PATH: process.env.PATH, PORT: String(port) },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let err = '';
  child.stderr!.on('data', (b: Buffer) => {
    err += b.toString();
  });
  await eventually(`server-everything ${mode} listening`, () => /listening|running/i.test(err), {
    describe: () => err,
  });
  return child;
}

export const stopChild = (c: ChildProcess) =>
  new Promise<void>((r) => {
    if (c.exitCode !== null || c.signalCode !== null) return r();
    c.once('exit', () => r());
    c.kill('SIGKILL');
  });
