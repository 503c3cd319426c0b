import { createServer } from 'node:net';
import { errorMessage } from '../common/errors.ts';

/** A loopback port that was free a moment ago (the OS picks it). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      const port = typeof addr === 'object' && addr ? addr.port : 0;
      srv.close(() => resolve(port));
    });
  });
}

/** What a server that lost the race for its port says when it exits. */
const PORT_CLASH = /address already in use|EADDRINUSE|could not bind/i;

/**
 * Runs `start` again (it picks new free ports each time) when the server lost its port to another
 * process between freePort() and its own bind: a free port is only free until someone takes it.
 */
export async function retryOnPortClash<T>(start: () => Promise<T>, attempts = 3): Promise<T> {
  for (let i = 1; ; i++) {
    try {
      return await start();
    } catch (e) {
      if (i >= attempts || !PORT_CLASH.test(errorMessage(e))) throw e;
    }
  }
}
