/**
 * The bench's instant responders, in a process of their own: one ScriptedAgent per role given on the
 * command line, each bidding and answering through Redis directly. The role `agent00` bids `exclusive`
 * on goals and answers with a Terminal artefact; every other role bids `ignore`.
 * Prints `responders_ready` once subscribed; stops on SIGTERM/SIGINT.
 * Run (by bench/orchestrator/main.ts): node bench/orchestrator/responders.ts <redis-url> <instance> <role>...
 */
import type { Artefact } from '../../src/blackboard/types.ts';
import { ScriptedAgent } from '../../src/orchestrator/testkit.ts';

const EXCLUSIVE_ROLE = 'agent00';

const [url, instance, ...roles] = process.argv.slice(2);
if (!url || !instance || !roles.length) {
  process.stderr.write('usage: responders.ts <redis-url> <instance> <role>...\n');
  process.exit(2);
}

const agents = await Promise.all(
  roles.map((role) =>
    ScriptedAgent.start(url, instance, {
      role,
      bid: (a: Artefact) => (role === EXCLUSIVE_ROLE && a.type === 'GoalDefined' ? 'exclusive' : 'ignore'),
      respond: () => ({ structural_type: 'Terminal', type: 'Done', payload: 'ok' }),
    }),
  ),
);
process.stdout.write(`responders_ready ${roles.join(',')}\n`);

const signal = await new Promise<NodeJS.Signals>((resolve) => {
  process.once('SIGTERM', () => resolve('SIGTERM'));
  process.once('SIGINT', () => resolve('SIGINT'));
});
await Promise.all(agents.map((a) => a.stop()));
process.stdout.write(`responders_stopped ${signal}\n`);
process.exit(0);
