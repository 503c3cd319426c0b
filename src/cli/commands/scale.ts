import { setTimeout as sleep } from 'node:timers/promises';
import { z } from 'zod';
import { readState } from '../../local/instance.ts';
import { workerName, writeScale } from '../../local/scale.ts';
import { CliError, EXIT, out, paint } from '../output.ts';
import { resolveInstance } from '../resolve.ts';

const Count = z.coerce.number().int().min(0).max(1000);

/** `holt scale <role> N`: the number of worker processes of a scalable role (local mode). */
export async function scale(
  role: string,
  count: string,
  opts: { name?: string; timeout?: string },
): Promise<void> {
  const n = Count.safeParse(count);
  if (!n.success)
    throw new CliError(`worker count must be a whole number from 0 to 1000, got '${count}'`, EXIT.usage);
  const s = resolveInstance(opts.name);
  const controller = s.components.find((c) => c.role === role && c.kind === 'controller');
  if (!controller) {
    const roles = [...new Set(s.components.filter((c) => c.kind === 'controller').map((c) => c.role))];
    throw new CliError(
      `'${role}' is not a scalable agent of instance '${s.name}'${roles.length ? ` (scalable: ${roles.join(', ')})` : ''}: give it replicas > 1 or a worker section`,
      EXIT.notFound,
    );
  }
  writeScale(s.name, role, n.data);
  process.kill(s.supervisorPid, 'SIGHUP');
  // Done when exactly workers 0..N-1 of the role are listed (new ones may still be starting).
  const deadline = Date.now() + Number(opts.timeout ?? '30') * 1000;
  const want = Array.from({ length: n.data }, (_, i) => workerName(role, i)).sort();
  for (;;) {
    const have = (readState(s.name)?.components ?? [])
      .filter((c) => c.role === role && c.kind === 'worker')
      .map((c) => c.name)
      .sort();
    if (JSON.stringify(have) === JSON.stringify(want)) break;
    if (Date.now() > deadline)
      throw new CliError(`'${role}' did not reach ${n.data} worker(s) in time`, EXIT.timeout);
    await sleep(100);
  }
  out(`${paint('green', '✓')} ${role}: ${n.data} worker(s)`);
}
