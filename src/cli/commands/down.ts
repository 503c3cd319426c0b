import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { postgresDir } from '../../local/daemon.ts';
import { instanceDir, isAlive, stateFile } from '../../local/instance.ts';
import { CliError, EXIT, out, paint, progress } from '../output.ts';
import { resolveInstance } from '../resolve.ts';

export async function down(opts: { name?: string; purge?: boolean }): Promise<void> {
  const s = resolveInstance(opts.name, { mustRun: false });
  const p = progress(`Stopping instance '${s.name}'`);
  if (isAlive(s.supervisorPid)) {
    process.kill(s.supervisorPid, 'SIGTERM');
    const deadline = Date.now() + 30_000;
    while (isAlive(s.supervisorPid) && Date.now() < deadline) await sleep(100);
    if (isAlive(s.supervisorPid)) {
      p.done();
      throw new CliError(
        `instance '${s.name}' did not stop within 30 s (supervisor pid ${s.supervisorPid})`,
        EXIT.timeout,
      );
    }
  }
  // Anything the supervisor could not stop (it was killed itself) is stopped here.
  for (const c of [...s.components, ...s.stores]) if (c.pid && isAlive(c.pid)) process.kill(c.pid, 'SIGKILL');
  p.done();
  if (opts.purge) {
    rmSync(postgresDir(s.name), { recursive: true, force: true });
    // Data and state go; the logs stay for a post-mortem.
    rmSync(join(instanceDir(s.name), 'data'), { recursive: true, force: true });
    rmSync(stateFile(s.name), { force: true });
  }
  out(
    `${paint('green', '✓')} Instance '${s.name}' removed successfully${opts.purge ? ' (data deleted)' : ''}`,
  );
}
