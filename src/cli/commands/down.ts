import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { postgresDir } from '../../local/daemon.ts';
import { detectEngine, removeInstanceContainers } from '../../local/engine.ts';
import {
  type InstanceState,
  instanceDir,
  isAlive,
  isOurProcess,
  stateFile,
  supervisorAlive,
} from '../../local/instance.ts';
import { CliError, EXIT, out, paint, progress } from '../output.ts';
import { resolveInstance } from '../resolve.ts';

export async function down(opts: { name?: string; purge?: boolean }): Promise<void> {
  const s = resolveInstance(opts.name, { mustRun: false });
  const p = progress(`Stopping instance '${s.name}'`);
  if (supervisorAlive(s)) {
    process.kill(s.supervisorPid, 'SIGTERM');
    // The supervisor gives pups their grace, then SIGKILLs; leave it time to do both.
    const deadline = Date.now() + 45_000;
    while (isAlive(s.supervisorPid) && Date.now() < deadline) await sleep(100);
    if (isAlive(s.supervisorPid)) {
      p.done();
      throw new CliError(
        `instance '${s.name}' did not stop within 45 s (supervisor pid ${s.supervisorPid})`,
        EXIT.timeout,
      );
    }
  }
  await stopLeftovers(s);
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

/**
 * Whatever the supervisor could not stop (it was killed itself) is stopped here, after checking each
 * pid is still ours. Stores get a clean stop first (SIGINT is Postgres's fast shutdown, which also ends
 * its backends), then SIGKILL.
 */
async function stopLeftovers(s: InstanceState): Promise<void> {
  const marker: Record<string, string> = { redis: 'redis-server', nats: 'nats-server', postgres: 'postgres' };
  const stores = s.stores.filter((x) => isOurProcess(x.pid, marker[x.name] ?? x.name));
  const components = s.components.filter((c) => c.pid && isOurProcess(c.pid, 'main.ts'));
  for (const c of components) process.kill(c.pid!, 'SIGKILL');
  for (const x of stores) process.kill(x.pid, x.name === 'postgres' ? 'SIGINT' : 'SIGTERM');
  const deadline = Date.now() + 5_000;
  while (stores.some((x) => isAlive(x.pid)) && Date.now() < deadline) await sleep(100);
  for (const x of stores) if (isAlive(x.pid)) process.kill(x.pid, 'SIGKILL');
  // Agent containers outlive a killed supervisor (the engine runs them): remove them by label.
  if (s.components.some((c) => c.kind === 'tools')) {
    const engine = await detectEngine(process.env);
    if (engine) await removeInstanceContainers(engine, s.name).catch(() => undefined);
  }
}
