import { silentLogger } from '../common/logger.ts';
import { type Bridge, startBridge } from './bridge.ts';

/** `holt mcp-bridge` on a free loopback port, running `command args` (Node by default), as tests use it. */
export const testBridge = (args: string[], command = process.execPath, maxSessions = 8): Promise<Bridge> =>
  startBridge({
    command,
    args,
    env: { PATH: process.env.PATH ?? '' },
    port: 0,
    host: '127.0.0.1',
    hostnames: ['127.0.0.1'],
    path: '/mcp',
    maxSessions,
    idleMs: 600_000,
    log: silentLogger(),
  });
