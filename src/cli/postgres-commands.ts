import type { Command, Option } from 'commander';
import type { KubeRefHolt } from './kube.ts';

// The command families on a Holt's Postgres (work items, memories, living agents), registered here to
// keep main.ts short. As there, each command's module is imported only when it runs.
const cmd = {
  life: () => import('./commands/life.ts'),
  memory: () => import('./commands/memory.ts'),
  work: () => import('./commands/work.ts'),
};

/** What each reads with `--kube`: the Holt's Postgres, through a port-forward (main.ts). */
export const POSTGRES_KUBE_COMMANDS = [
  'work list',
  'work show',
  'memory list',
  'memory search',
  'memory forget',
  'life show',
  'life stop',
  'life start',
] as const;

const MEMORY_HELP = `
Memories are an LLM agent's long-term memory (spec.llm.memory, docs/agents.md § Memory): what it did,
saw and concluded, recalled at its turns by their words and, with an embeddings model, their meaning.`;

/** `holt work` and `holt memory`. */
export function addWorkCommands(p: Command, nameOpt: () => Option): void {
  const work = p.command('work').description("agents' work items: durable objectives that outlive turns");
  work
    .command('list')
    .description('work items with their readiness (open ones unless --all)')
    .argument('[role]', 'one agent role')
    .addOption(nameOpt())
    .option('--all', 'finished items too')
    .option('-j, --json', 'JSON output')
    .action(async (role, o) => (await cmd.work()).workList(role, o));
  work
    .command('show')
    .description('one work item: objective, readiness, todos, what blocks it, its report')
    .argument('<id>', 'work item id or prefix')
    .addOption(nameOpt())
    .option('-j, --json', 'JSON output')
    .action(async (id, o) => (await cmd.work()).workShow(id, o));

  const memory = p
    .command('memory')
    .description("LLM agents' long-term memories: list, search and forget them")
    .addHelpText('after', MEMORY_HELP);
  memory
    .command('list')
    .description('the newest live memories: id, agent, scope, kind, authority, uses, age, first words')
    .option('--role <role>', "one agent's: its own and its Holt's")
    .option('--kind <kinds>', 'only these kinds, comma-separated: action, observation, report, note')
    .option('--limit <n>', 'at most this many (up to 1000)', '50')
    .addOption(nameOpt())
    .option('-j, --json', 'JSON output (every field, the whole text)')
    .action(async (o) => (await cmd.memory()).memoryList(o));
  memory
    .command('search')
    .description(
      "what an agent would recall for some words (its memories and its Holt's), best first; by words only, and not counted as a recall",
    )
    .argument('<role>', 'agent role')
    .argument('<text>', 'the words to look for')
    .option('--k <n>', 'at most this many (up to 50)', '5')
    .option('--kind <kinds>', 'only these kinds, comma-separated')
    .addOption(nameOpt())
    .option('-j, --json', 'JSON output (with each one’s score and rank)')
    .action(async (role, text, o) => (await cmd.memory()).memorySearch(role, text, o));
  memory
    .command('forget')
    .description('forget one memory by its id, or every memory an agent wrote (--role ROLE --all --yes)')
    .argument('[id]', 'memory id (see holt memory list)')
    .option('--role <role>', 'with --all: the agent whose memories go (its Holt-wide ones too)')
    .option('--all', "every memory of --role's agent")
    .option('--yes', 'with --all: do it (without, it says how many would go and stops)')
    .addOption(nameOpt())
    .action(async (id, o) => (await cmd.memory()).memoryForget(id, o));
}

/** What each reaches with `--kube` through the orchestrator's ingress API, port-forwarded (send.ts). */
export const INGRESS_KUBE_COMMANDS = ['life tasks', 'life cancel'] as const;

const TOKEN_HELP =
  "an operator token of the agent (env HOLT_TOKEN; default: the CLI's own; with --kube, the agent's first token of origin operator)";

/** `holt life`; `kube` is the Holt of --kube, if any (read before the command runs). */
export function addLifeCommands(
  p: Command,
  nameOpt: () => Option,
  kube: () => KubeRefHolt | undefined,
): void {
  const life = p.command('life').description('living agents: their messages, decisions, and stopping them');
  life
    .command('show')
    .description("an agent's messages with their provenance labels, and its scheduler's decisions")
    .argument('<role>', 'agent role')
    .addOption(nameOpt())
    .option('-j, --json', 'JSON output')
    .action(async (role, o) => (await cmd.life()).lifeShow(role, o));
  life
    .command('stop')
    .description('stop an agent: its ingress answers 409 and it starts no turn')
    .argument('<role>', 'agent role')
    .addOption(nameOpt())
    .action(async (role, o) => (await cmd.life()).lifeState(role, 'stopped', o));
  life
    .command('start')
    .description('start a stopped agent again')
    .argument('<role>', 'agent role')
    .addOption(nameOpt())
    .action(async (role, o) => (await cmd.life()).lifeState(role, 'running', o));
  life
    .command('tasks')
    .description(
      "an agent's open tasks: its waits (timer, message, operator) and asynchronous calls (nats, command)",
    )
    .argument('<role>', 'agent role')
    .addOption(nameOpt())
    .option('--token <token>', TOKEN_HELP)
    .option('-j, --json', 'JSON output (full ids, deadlines)')
    .action(async (role, o) => (await cmd.life()).lifeTasks(kube(), role, o));
  life
    .command('cancel')
    .description(
      'cancel one task: a wait ends, a call gets a cancellation report, a background command is killed (its process group); the next turn is told',
    )
    .argument('<role>', 'agent role')
    .argument('<id>', 'task id, or its first 6 characters or more (holt life tasks ROLE)')
    .addOption(nameOpt())
    .option('--token <token>', TOKEN_HELP)
    .action(async (role, id, o) => (await cmd.life()).lifeCancel(kube(), role, id, o));
}
