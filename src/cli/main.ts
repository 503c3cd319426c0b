import { Command, CommanderError, Option } from 'commander';
import { ConfigError } from '../common/config.ts';
import { withCredentials } from '../common/credentials.ts';
import { errorMessage } from '../common/errors.ts';
import { installFatalHandlers } from '../common/fatal.ts';
import { VERSION } from '../common/version.ts';
import { OPERATOR_PROGRAM } from '../operator/program.ts';
import { ORCHESTRATOR_PROGRAM } from '../orchestrator/program.ts';
import { PUP_PROGRAM } from '../pup/program.ts';
import { MIGRATE_PROGRAM } from '../state/migrate-program.ts';
import { GRAPH_FORMATS } from './commands/graph-formats.ts';
import { bashCompletion, zshCompletion } from './completion.ts';
import type { KubeHolt, KubeRefHolt } from './kube.ts';
import { CliError, EXIT, err, out, paint } from './output.ts';
import {
  addLifeCommands,
  addWorkCommands,
  INGRESS_KUBE_COMMANDS,
  POSTGRES_KUBE_COMMANDS,
} from './postgres-commands.ts';
import { closeRemoteTarget, positiveInt, useRemotePostgres, useRemoteTarget } from './target.ts';

// Every command's module is imported when it runs: `holt pup` (every agent process) must not load the
// Kubernetes client, Graphviz or Postgres that other commands need.
const cmd = {
  cluster: () => import('./commands/cluster.ts'),
  clusterTokens: () => import('./commands/cluster-tokens.ts'),
  console: () => import('./commands/console.ts'),
  convert: () => import('./commands/convert.ts'),
  down: () => import('./commands/down.ts'),
  forage: () => import('./commands/forage.ts'),
  graph: () => import('./commands/graph.ts'),
  hoard: () => import('./commands/hoard.ts'),
  ingress: () => import('./commands/ingress.ts'),
  init: () => import('./commands/init.ts'),
  list: () => import('./commands/list.ts'),
  logs: () => import('./commands/logs.ts'),
  mcp: () => import('./commands/mcp.ts'),
  questions: () => import('./commands/questions.ts'),
  scale: () => import('./commands/scale.ts'),
  status: () => import('./commands/status.ts'),
  up: () => import('./commands/up.ts'),
  watch: () => import('./commands/watch.ts'),
};

/**
 * The commands that work on a Holt in a cluster (`--kube`), and what each opens: its Redis or its
 * Postgres (port-forwarded by the API server), or nothing but the API server.
 */
const KUBE_COMMANDS: Record<string, 'redis' | 'postgres' | 'redis+postgres' | 'api'> = {
  forage: 'redis',
  watch: 'redis',
  hoard: 'redis',
  graph: 'redis',
  // Its board, and its Postgres for the living agents page (without it, the board alone).
  console: 'redis+postgres',
  questions: 'redis',
  answer: 'redis',
  status: 'redis',
  mcp: 'redis',
  logs: 'api',
  send: 'api',
  wake: 'api',
  ...Object.fromEntries(POSTGRES_KUBE_COMMANDS.map((c) => [c, 'postgres' as const])),
  ...Object.fromEntries(INGRESS_KUBE_COMMANDS.map((c) => [c, 'api' as const])),
  'token list': 'api',
  'token show': 'api',
  'token create': 'api',
  'token revoke': 'api',
};
/** The Holt of --kube or HOLT_KUBE, read before the command runs; kubeHolt: with its Redis open. */
let kubeRef: KubeRefHolt | undefined;
let kubeHolt: KubeHolt | undefined;
const kube = (): KubeHolt => kubeHolt as KubeHolt;

const EXIT_HELP = `
Exit codes:
  0  success            3  instance, artefact or component not found
  1  error              4  the git workspace is not clean (forage)
  2  bad usage or file  5  timed out waiting
  70 a bug: an unhandled rejection or exception (logged as one JSON line on stderr)`;

/** The runtime programs' own command lines (their flags complete too). */
const RUNTIME_PROGRAMS = {
  orchestrator: ORCHESTRATOR_PROGRAM,
  pup: PUP_PROGRAM,
  operator: OPERATOR_PROGRAM,
  migrate: MIGRATE_PROGRAM,
};

const nameOpt = () =>
  new Option('-n, --name <instance>', 'instance name (default: the instance of this workspace)');
const outOpt = () =>
  new Option('-o, --output <format>', 'output format: default or jsonl').default('default');

export function program(): Command {
  const p = new Command('holt')
    .description('Holt: clans of tool-equipped AI agents cooperating through a shared blackboard.')
    .version(VERSION)
    .showHelpAfterError('(run with --help for usage)')
    .addHelpText('after', EXIT_HELP)
    .option(
      '--kube <namespace/name>',
      "a Holt in a Kubernetes cluster instead of a local instance (env HOLT_KUBE): forage, watch, hoard, graph, console, questions, answer, status, mcp, logs, send, wake, work, memory, life and token list|show reach it through the API server, with your kubeconfig's rights",
    )
    .option(
      '--context <context>',
      'with --kube: the kubeconfig context (default: the current one, as kubectl)',
    )
    .exitOverride();
  p.hook('preAction', async (root, action) => {
    const { kube: flag, context } = root.opts<{ kube?: string; context?: string }>();
    const ref = flag ?? process.env.HOLT_KUBE;
    if (!ref) return;
    const path =
      action.parent && action.parent !== root ? `${action.parent.name()} ${action.name()}` : action.name();
    const needs = KUBE_COMMANDS[path];
    if (!needs) throw new CliError(`--kube: \`${path}\` works on local instances only`, EXIT.usage);
    const k = await import('./kube.ts');
    if (needs === 'redis' || needs === 'redis+postgres') {
      kubeHolt = await k.openKubeHolt(k.parseKubeRef(ref), context);
      kubeRef = kubeHolt;
      useRemoteTarget({
        name: kubeHolt.name,
        redisUrl: kubeHolt.redisUrl,
        redisOptions: kubeHolt.redisOptions,
        close: kubeHolt.close,
      });
      if (needs === 'redis+postgres')
        try {
          useRemotePostgres({ name: kubeHolt.name, ...(await k.openKubePostgres(kubeHolt)) });
        } catch (e) {
          process.stderr.write(
            `holt: the Holt's Postgres is out of reach (${errorMessage(e)}): the board only\n`,
          );
        }
      return;
    }
    kubeRef = await k.readKubeHolt(k.parseKubeRef(ref), context);
    if (needs === 'postgres')
      useRemotePostgres({ name: kubeRef.name, ...(await k.openKubePostgres(kubeRef)) });
  });

  p.command('init')
    .description(
      'start a Holt project here: a commented holt.yml and one example agent (agents/example-agent)',
    )
    .option('--force', 'rewrite those files if they exist (nothing else in agents/ is touched)')
    .action(async (o) => (await cmd.init()).init(o));
  p.command('up')
    .description('start a Holt on this machine: Redis, NATS, Postgres, the orchestrator and every agent')
    .option('-f, --file <file>', 'Holt file (Holt holt.yml v1.0 or version 2)', 'holt.yml')
    .addOption(nameOpt())
    .option('--force', 'start even if another instance uses this workspace')
    .option('--timeout <seconds>', 'how long to wait for every component to be healthy', '60')
    .option(
      '--no-containers',
      "run every agent's tools on this machine, even an agent that names an image (default: in its image, with Docker or Podman)",
    )
    .action(async (o) => (await cmd.up()).up(o));
  p.command('down')
    .description('stop an instance and every process it started')
    .addOption(nameOpt())
    .option('--purge', 'also delete its data (blackboard, inbox); logs are kept')
    .action(async (o) => (await cmd.down()).down(o));
  p.command('list')
    .description('list local instances')
    .option('-j, --json', 'JSON output')
    .action(async (o) => (await cmd.list()).list(o));
  p.command('status')
    .description('an instance: its components and their health, claims by status')
    .addOption(nameOpt())
    .option('-j, --json', 'JSON output')
    .action(async (o) =>
      kubeHolt ? (await cmd.cluster()).kubeStatus(kube(), o) : (await cmd.status()).status(o),
    );
  p.command('forage')
    .description('start a workflow: create a GoalDefined artefact')
    .requiredOption('-g, --goal <text>', 'the goal')
    .addOption(nameOpt())
    .option('-w, --watch', 'stream the workflow until it completes')
    .option('--allow-dirty', 'do not require a clean git workspace')
    .addOption(outOpt())
    .option('--timeout <seconds>', 'with --watch: give up after this many seconds (exit 5)')
    .option('--traceparent <value>', 'continue this W3C trace [$TRACEPARENT, else a new one]')
    .action(async (o) => (await cmd.forage()).forage(o));
  p.command('watch')
    .description('live events, with history replay when a filter is given')
    .addOption(nameOpt())
    .addOption(outOpt())
    .option('--since <time>', 'RFC3339 time or a duration before now (5m)')
    .option('--until <time>', 'RFC3339 time or a duration before now')
    .option('--type <glob>', 'only artefacts whose type matches')
    .option('--agent <role>', 'only artefacts produced by this role')
    .option('--exit-on-completion', 'exit 0 on a Terminal artefact (1 on an orchestrator Failure)')
    .option('--timeout <seconds>', 'give up after this many seconds (exit 5)')
    .action(async (o) => (await cmd.watch()).watch(o));
  p.command('hoard')
    .description('list artefacts, or show one by id (a prefix of 6+ characters is enough)')
    .argument('[id]', 'artefact id or prefix')
    .addOption(nameOpt())
    .addOption(outOpt())
    .option('--since <time>', 'RFC3339 time or a duration before now')
    .option('--until <time>', 'RFC3339 time or a duration before now')
    .option('--type <glob>', 'only artefacts whose type matches')
    .option('--agent <role>', 'only artefacts produced by this role')
    .option('--messages', "living agents' messages with their provenance labels instead (local mode)")
    .action(async (id, o) => (await cmd.hoard()).hoard(id, o));
  p.command('graph')
    .description(
      'draw the artefact graph: who made what from what, review verdicts, rework, the work in progress',
    )
    .addOption(nameOpt())
    .addOption(
      new Option(
        '-o, --output <format>',
        'mermaid (Markdown renders it), dot (Graphviz), svg or html (a page)',
      )
        .choices(GRAPH_FORMATS)
        .default('mermaid'),
    )
    .option('--goal <id>', 'only the workflow of this goal artefact (id, or a prefix of 6+ characters)')
    .option('--file <path>', 'write the picture to this file instead of standard output')
    .option('--serve', 'with -o html: serve the page on 127.0.0.1, redrawn live while the work goes on')
    .option('--port <port>', 'with --serve: the port (default: a free one, printed)')
    .action(async (o) => (await cmd.graph()).graph(o));
  p.command('console')
    .description(
      'open the console in a browser: workflows live, questions answered and calls approved (the link it prints works once)',
    )
    .addOption(nameOpt())
    .option('--port <port>', 'the port on 127.0.0.1 (default: a free one, printed)')
    .option('--read-only', 'a link that may look but not answer or approve')
    .option(
      '--traces-url <url>',
      "a trace viewer's URL (Jaeger's UI): each workflow's trace id links to <url>/trace/<id> [$HOLT_TRACES_UI_URL]",
    )
    .action(async (o) => (await cmd.console()).consoleCommand(o));
  p.command('questions')
    .description('questions agents asked that nobody answered yet')
    .addOption(nameOpt())
    .addOption(outOpt())
    .option('--wait', 'block until a question appears')
    .action(async (o) => (await cmd.questions()).questions(o));
  p.command('mcp')
    .description(
      'serve this Holt to an MCP client (an IDE assistant) on standard input and output: goals, status, artefacts, questions, messages, graphs',
    )
    .addOption(nameOpt())
    .addHelpText(
      'after',
      '\nIn the client\'s configuration: {"command": "holt", "args": ["mcp"], "cwd": "<workspace>"}',
    )
    .action(async (o) => (await cmd.mcp()).mcp(o, kubeHolt));
  p.command('answer')
    .description('answer a question; the asking agent resumes')
    .argument('<question-id>', 'question id or prefix')
    .argument('<text>', 'the answer')
    .addOption(nameOpt())
    .action(async (id, text, o) => (await cmd.questions()).answer(id, text, o));
  addWorkCommands(p, nameOpt);
  const token = p
    .command('token')
    .description(
      "capability tokens of living agents' ingress (on a cluster: list and show those of the Agents' spec.ingress, made and revoked there)",
    );
  token
    .command('create')
    .description('make a token for one agent (printed once; only its hash is kept)')
    .argument('<role>', 'agent role')
    .argument('[token-name]', 'token name (a DNS label; default: origin-xxxxxxxx)')
    .option('--mode <modes>', 'enqueue_message and/or wake_hint, comma-separated [both]')
    .option(
      '--origin <origin>',
      'what it admits: webhook (external evidence), callback (signals) or operator (instructions) [webhook]',
    )
    .option('--rate <n>', 'requests a minute [60]')
    .option('--max-priority <n>', 'the highest "priority" (0-9) its messages may ask for [0]')
    .option(
      '--callback <name=url>',
      'a callback its messages may name ("reply_to") to have their outcome delivered there, signed: an http(s) URL, or nats:<tool> for the service of that async: nats tool (repeatable)',
      (v: string, prev: string[] = []) => [...prev, v],
    )
    .addOption(nameOpt())
    .action(async (role, tokenName, o) =>
      kubeRef
        ? (await cmd.clusterTokens()).kubeTokenChange(kubeRef, 'create')
        : (await cmd.ingress()).tokenCreate(role, tokenName, o),
    );
  token
    .command('list')
    .description('tokens (names, agents, scopes; never the tokens)')
    .argument('[role]', 'one agent role')
    .addOption(nameOpt())
    .option('-j, --json', 'JSON output')
    .action(async (role, o) =>
      kubeRef
        ? (await cmd.clusterTokens()).kubeTokenList(kubeRef, role, o)
        : (await cmd.ingress()).tokenList(role, o),
    );
  token
    .command('show')
    .description('print a token (with --kube: from its Secret; a local token is shown once, when made)')
    .argument('<role>', 'agent role')
    .argument('<name>', 'token name')
    .action(async (role, name) => {
      if (!kubeRef)
        throw new CliError(
          'token show: a local token is shown once, when `holt token create` makes it (only its hash is kept)',
          EXIT.usage,
        );
      await (await cmd.clusterTokens()).kubeTokenShow(kubeRef, role, name);
    });
  token
    .command('revoke')
    .description('delete a token: refused from the next request on')
    .argument('<role>', 'agent role')
    .argument('<name>', 'token name')
    .addOption(nameOpt())
    .action(async (role, name, o) =>
      kubeRef
        ? (await cmd.clusterTokens()).kubeTokenChange(kubeRef, 'revoke')
        : (await cmd.ingress()).tokenRevoke(role, name, o),
    );
  p.command('send')
    .description("queue a message for a living agent through its ingress (an operator's instruction)")
    .argument('<role>', 'agent role')
    .argument('<text>', 'the message')
    .addOption(nameOpt())
    .option(
      '--token <token>',
      "a token of the agent (env HOLT_TOKEN; default: the CLI's own operator token; with --kube, the agent's first token of origin operator)",
    )
    .option('--key <key>', 'idempotency key (default: a new one; repeat it to make a retry a no-op)')
    .action(async (role, text, o) =>
      kubeRef
        ? (await cmd.ingress()).sendKube(kubeRef, 'messages', role, text, o)
        : (await cmd.ingress()).sendLocal('messages', role, text, o),
    );
  p.command('wake')
    .description('wake a living agent (a hint only: it looks at its state; nothing is shown to the model)')
    .argument('<role>', 'agent role')
    .addOption(nameOpt())
    .option('--token <token>', 'a token of the agent (env HOLT_TOKEN)')
    .option('--key <key>', 'idempotency key')
    .action(async (role, o) =>
      kubeRef
        ? (await cmd.ingress()).sendKube(kubeRef, 'wake', role, undefined, o)
        : (await cmd.ingress()).sendLocal('wake', role, undefined, o),
    );
  p.command('tool-url')
    .description(
      "the NATS URL a tool service connects with (local mode): it hears cmd.tool.<instance>.<name> and may only answer; --tool: a user for that one tool only; on a cluster, the <holt>-nats Secret's tool-url",
    )
    .addOption(nameOpt())
    .option('--tool <name>', "one tool's user: it hears that tool's requests only")
    .action(async (o) => (await cmd.ingress()).toolUrl(o));
  addLifeCommands(p, nameOpt, () => kubeRef);
  p.command('logs')
    .description("show a component's log (an agent role, or orchestrator)")
    .argument('<component>', 'agent role or orchestrator')
    .addOption(nameOpt())
    .option('-f, --follow', 'keep printing new lines')
    .option('--lines <n>', 'lines to show', '100')
    .action(async (c, o) =>
      kubeRef ? (await cmd.cluster()).kubeLogs(kubeRef, c, o) : (await cmd.logs()).logs(c, o),
    );
  p.command('scale')
    .description('set the number of worker processes of a scalable agent (local mode)')
    .argument('<role>', 'agent role')
    .argument('<count>', 'worker processes (0 stops them all; the controller keeps bidding)')
    .addOption(nameOpt())
    .option('--timeout <seconds>', 'how long to wait for the workers to start or stop', '30')
    .action(async (role, count, o) => (await cmd.scale()).scale(role, count, o));
  p.command('convert')
    .description('print the Kubernetes manifests (Holt, Agent, WorkerPool) equivalent to a Holt file')
    .argument('[file]', 'Holt file', 'holt.yml')
    .addOption(nameOpt())
    .option('--namespace <ns>', 'namespace to put in the manifests')
    .action(async (f, o) => (await cmd.convert()).convert(f, o));

  // Programs of the runtime, run inside pods or by `holt up`.
  p.command('orchestrator', { hidden: false })
    .description('run the orchestrator (configured by environment: docs/configuration.md)')
    .allowUnknownOption()
    .allowExcessArguments()
    .helpOption(false)
    .action(async (_o, cmd: Command) => {
      const m = await import('../orchestrator/main.ts');
      process.exitCode = await m.main(cmd.args, withCredentials(process.env));
    });
  p.command('pup')
    .description('run the agent pup (configured by environment: docs/configuration.md)')
    .allowUnknownOption()
    .allowExcessArguments()
    .helpOption(false)
    .action(async (_o, cmd: Command) => {
      const m = await import('../agent/main.ts');
      process.exitCode = await m.main(cmd.args, withCredentials(process.env));
    });
  p.command('tool-runner')
    .description(
      "run an agent pod's tool runner: runs the pup's tools, bid scripts and health checks (no credentials)",
    )
    .version(VERSION, '-V, --version', 'print the version and exit')
    .requiredOption('--socket <path>', 'unix socket the pup connects to (in a volume both containers mount)')
    .action(async (o: { socket: string }) => {
      const m = await import('../pup/runner/main.ts');
      process.exitCode = await m.main(o.socket, process.env);
    });
  p.command('mcp-bridge')
    .description('serve a stdio MCP server over Streamable HTTP (options, then -- and its command)')
    .argument('<command...>', 'the server command and its arguments')
    .option('--port <n>', 'port to listen on', '8080')
    .option('--listen <addr>', 'address to listen on', '0.0.0.0')
    .option('--path <path>', 'the MCP endpoint', '/mcp')
    .option('--hostname <name...>', 'Host names clients use (others refused)', ['localhost', '127.0.0.1'])
    .option('--max-sessions <n>', 'sessions (processes) at most', '16')
    .option('--idle-seconds <n>', 'close a session idle this long', '600')
    .action(async (argv: string[], o: Record<string, string | string[]>) => {
      process.exitCode = await (await import('../mcp-bridge/main.ts')).run(argv, o, process.env);
    });
  p.command('migrate')
    .description('apply the inbox schema migrations to DATABASE_URL and exit (the migration Job)')
    .allowUnknownOption()
    .allowExcessArguments()
    .helpOption(false)
    .action(async (_o, cmd: Command) => {
      const m = await import('../state/migrate-main.ts');
      process.exitCode = await m.main(cmd.args, withCredentials(process.env));
    });
  p.command('operator')
    .description('run the Kubernetes operator (flags and environment: docs/configuration.md)')
    .allowUnknownOption()
    .allowExcessArguments()
    .helpOption(false)
    .action(async (_o, cmd: Command) => {
      const m = await import('../operator/main.ts');
      process.exitCode = await m.main(cmd.args, process.env);
    });
  p.command('completion')
    .description('print a shell completion script for bash or zsh')
    .argument('<shell>', 'bash or zsh')
    .action((shell: string) => {
      if (shell === 'bash') return out(bashCompletion(p, RUNTIME_PROGRAMS).trimEnd());
      if (shell === 'zsh') return out(zshCompletion(p, RUNTIME_PROGRAMS).trimEnd());
      throw new CliError(`completion: unknown shell ${shell} (bash or zsh)`, EXIT.usage);
    });
  p.command('__supervise', { hidden: true })
    .requiredOption('--name <name>')
    .requiredOption('--file <file>')
    .requiredOption('--workspace <dir>')
    .option('--ready-timeout <ms>', 'how long components get to become healthy', '30000')
    .option('--no-containers')
    .action(async (o) => {
      const m = await import('../local/daemon.ts');
      const code = await m.runDaemon({
        ...o,
        readyTimeoutMs: positiveInt('--ready-timeout', o.readyTimeout),
        env: withCredentials(process.env),
      });
      // Everything it started is stopped by now; a stray handle must not keep the supervisor around.
      process.exit(code);
    });
  return p;
}

export async function main(argv: string[]): Promise<number> {
  try {
    await program().parseAsync(argv, { from: 'user' });
    return typeof process.exitCode === 'number' ? process.exitCode : 0;
  } catch (e) {
    if (e instanceof CommanderError) return e.exitCode === 0 ? 0 : EXIT.usage;
    if (e instanceof CliError) {
      err(`${paint('red', 'Error:', process.stderr)} ${e.message}`);
      return e.code;
    }
    if (e instanceof ConfigError) {
      err(`${paint('red', 'Error:', process.stderr)} ${e.message}`);
      return EXIT.usage;
    }
    err(`${paint('red', 'Error:', process.stderr)} ${errorMessage(e)}`);
    if (process.env.HOLT_DEBUG) err(String((e as Error).stack));
    return EXIT.error;
  } finally {
    // The port-forward of --kube would keep the process alive.
    await closeRemoteTarget().catch(() => undefined);
  }
}

if (import.meta.main) {
  installFatalHandlers(`holt ${process.argv[2] ?? ''}`.trim());
  const code = await main(process.argv.slice(2));
  process.exitCode = code;
}
