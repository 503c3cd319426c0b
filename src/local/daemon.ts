import { createHash } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { natsAuthorization, natsUrl as natsUserUrl, toolUsers } from '../access/nats.ts';
import { ensureRoles, PG_OWNER, PG_ROLE, type PgComponent, pgUrlAs } from '../access/postgres.ts';
import type { Principal } from '../access/principals.ts';
import { redisAclLines, redisUrl as redisUserUrl } from '../access/redis.ts';
import { isScalable, workerTargetOf } from '../api/agent.ts';
import { DEFAULT_RUNTIME_IMAGE } from '../api/common.ts';
import { type HoltFile, type HoltFileAgent, loadHoltFile } from '../api/holtfile.ts';
import { mcpHeaderSecrets, pupEnvironment } from '../api/pupenv.ts';
import { registrationOf } from '../api/registry.ts';
import { Blackboard } from '../blackboard/client.ts';
import type { PupMode } from '../blackboard/pup-mode.ts';
import { setAgents } from '../blackboard/registry.ts';
import { reportWorkerExit } from '../blackboard/worker-exits.ts';
import { errorMessage } from '../common/errors.ts';
import { createLogger, type Logger } from '../common/logger.ts';
import { componentEnvironment, LLM_KEY_VARS, Scrubber } from '../common/secrets.ts';
import { migrate } from '../state/migrate.ts';
import { type InstanceState, ingressTokensFile, instanceDir, writeState } from './instance.ts';
import { startNats } from './nats.ts';
import { freePort } from './ports.ts';
import { startPostgres } from './postgres.ts';
import { startRedis } from './redis.ts';
import { readScale, workerCount, workerName, workersOf } from './scale.ts';
import { type InstanceSecrets, instanceSecrets } from './secrets.ts';
import { type ComponentExit, type ComponentSpec, LOCAL_PUP_GRACE_MS, Supervisor } from './supervisor.ts';
import {
  type LocalTools,
  prepareTools,
  releaseTools,
  TOOLS_SUFFIX,
  toolsComponent,
} from './tool-components.ts';
import { workerExitReport } from './worker-exit.ts';

const CLI = join(dirname(fileURLToPath(import.meta.url)), '..', 'cli', 'main.ts');

export interface DaemonOptions {
  name: string;
  file: string;
  workspace: string;
  /** How long components get to pass their health checks before `up` is rolled back. */
  readyTimeoutMs?: number;
  /** The environment of `holt up` with what it handed over on the credential descriptor. */
  env?: NodeJS.ProcessEnv;
  /** false: every agent's tools run on this machine, even an agent that names an image. */
  containers?: boolean;
}

/** `${VAR}` and `$VAR` from the environment of `holt up`, as Holt's os.ExpandEnv does on the host. */
export function expandEnv(value: string, env: NodeJS.ProcessEnv): string {
  return value.replace(
    /\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)/g,
    (_m, a, b) => env[a ?? b] ?? '',
  );
}

const holtArgv = () => [process.execPath, '--no-warnings=ExperimentalWarning', CLI];

/**
 * A pup's V8 young generation is kept to 1 MB a semi-space (16 by default): a pup's garbage is short
 * lived and small, and a Holt runs many pups (12 MB less each, idle; throughput unchanged in
 * bench/workflow). The runtime image's launcher does the same (images/launcher.sh).
 */
export const PUP_NODE_FLAGS = ['--max-semi-space-size=1'];

export function holtCommand(args: string[]): { command: string; args: string[] } {
  const [command, node, cli] = holtArgv();
  const flags = args[0] === 'pup' ? PUP_NODE_FLAGS : [];
  return { command: command as string, args: [...flags, node as string, cli as string, ...args] };
}

/** Postgres refuses root, and /root is not traversable by the postgres user: keep its data elsewhere. */
export function postgresDir(name: string): string {
  const own = join(instanceDir(name), 'data', 'postgres');
  if (process.getuid?.() !== 0) return own;
  // Keyed by the instance dir, so two HOLT_HOMEs with the same instance name never share data.
  return join('/var/lib/holt', `${name}-${createHash('sha256').update(own).digest('hex').slice(0, 12)}`);
}

type Make = (name: string, kind: ComponentSpec['kind'], mode: PupMode) => Promise<ComponentSpec[]>;

/** What every agent component of an instance starts from: its store URLs and `holt up`'s environment. */
interface InstanceBase {
  instance: string;
  workspace: string;
  conn: Record<string, string>;
  env: NodeJS.ProcessEnv;
  tools: LocalTools;
}

/** A pup, and before it the tool runner it uses when its tools do not run as its own children. */
function componentMaker(file: HoltFile, agent: HoltFileAgent, base: InstanceBase): Make {
  return async (name, kind, mode) => {
    const pup = await pupComponent(file, agent, base, name, kind, mode);
    const tools = toolsComponent(base.tools, {
      instance: base.instance,
      component: name,
      role: agent.role,
      image: mode === 'worker' ? (agent.worker?.image ?? agent.image) : agent.image,
      mode: (mode === 'worker' ? agent.worker?.workspaceMode : undefined) ?? agent.workspace.mode,
      workspace: base.workspace,
      pupEnv: pup.env as Record<string, string>,
      env: componentEnvironment(base.env, [file.holt.llm?.apiKeyEnv]),
    });
    if (!tools) return [pup];
    pup.env = { ...pup.env, ...tools.pupEnv };
    // The pup first: it is what its role names (holt logs, status); it waits for its runner to answer.
    return [pup, tools.spec];
  };
}

async function pupComponent(
  file: HoltFile,
  agent: HoltFileAgent,
  base: InstanceBase,
  name: string,
  kind: ComponentSpec['kind'],
  mode: PupMode,
): Promise<ComponentSpec> {
  const healthPort = await freePort();
  const literal = pupEnvironment(
    { ...agent, env: agent.env.map((e) => ({ ...e, value: e.value && expandEnv(e.value, base.env) })) },
    {
      instance: base.instance,
      role: agent.role,
      workspace: base.workspace,
      healthPort,
      mode,
      llm: file.holt.llm,
    },
  );
  // A remote MCP server's tokens travel on the descriptor too, never in the pup's environment.
  const { env, secrets: headers } = mcpHeaderSecrets(agent, literal, base.env);
  const keyEnv = file.holt.llm?.apiKeyEnv;
  // The model's key travels with the store credentials, on the descriptor.
  const keys = Object.fromEntries(
    [...LLM_KEY_VARS, keyEnv].flatMap((k) => (k && base.env[k] ? [[k, base.env[k] as string]] : [])),
  );
  return {
    name,
    kind,
    role: agent.role,
    ...holtCommand(['pup']),
    // The supervisor's stop grace outlasts this, so a pup always stops its own tool first.
    env: {
      HOLT_SHUTDOWN_GRACE_MS: String(LOCAL_PUP_GRACE_MS),
      ...componentEnvironment(base.env, [keyEnv, ...Object.keys(headers)]),
      ...env,
    },
    secrets: { ...base.conn, ...keys, ...headers },
    cwd: base.workspace,
    healthPort,
  };
}

async function agentComponents(
  file: HoltFile,
  agent: HoltFileAgent,
  base: InstanceBase & { scaled?: number },
): Promise<ComponentSpec[]> {
  const make = componentMaker(file, agent, base);
  if (!isScalable(agent)) return make(agent.role, 'agent', 'standard');
  // Scalable: one controller bids; workers execute from the inbox (fresh_per_call too: no Jobs locally).
  const workers = workerCount(agent, base.scaled);
  const specs: ComponentSpec[] = await make(agent.role, 'controller', 'controller');
  for (let i = 0; i < workers; i++) specs.push(...(await workerSpecs(make, agent, i)));
  return specs;
}

async function workerSpecs(make: Make, agent: HoltFileAgent, i: number): Promise<ComponentSpec[]> {
  const specs = await make(workerName(agent.role, i), 'worker', 'worker');
  const pup = specs[0] as ComponentSpec;
  pup.env = {
    ...pup.env,
    HOLT_WORKER_TARGET: workerTargetOf(agent, agent.role),
    HOLT_WORKER_CONCURRENCY: '1',
  };
  // Each start its own lease owner, as each pod has its own name: a crash report names only it.
  pup.identityEnv = 'HOLT_POD_NAME';
  return specs;
}

/** SIGHUP from `holt scale`: start or stop worker processes until each role has what scale.json says. */
async function rescale(sup: Supervisor, file: HoltFile, base: InstanceBase, log: Logger): Promise<void> {
  const wanted = readScale(base.instance);
  for (const agent of file.agents) {
    if (!isScalable(agent)) continue;
    const n = workerCount(agent, wanted[agent.role]);
    const have = workersOf(sup.names(), agent.role);
    for (let i = 0; i < n; i++) {
      if (have.some((w) => w.index === i)) continue;
      for (const c of await workerSpecs(componentMaker(file, agent, base), agent, i)) sup.add(c);
    }
    for (const w of have)
      if (w.index >= n) {
        await sup.remove(w.name);
        await sup.remove(`${w.name}${TOOLS_SUFFIX}`);
      }
    log.info({ event_type: 'scaled', role: agent.role, workers: n }, `${agent.role}: ${n} worker(s)`);
  }
}

/**
 * Each principal's URL: its own user on a bundled store, the given URL on an external one (a single
 * credential there; docs/security.md). Postgres: the superuser (CLI), the owner (migrations), and a
 * role per component (orchestrator, pup).
 */
function storeUrls(
  pw: InstanceSecrets,
  bundled: { redis?: number; nats?: number; pg?: string },
  external: { redisUrl?: string; natsUrl?: string; pgUrl?: string },
) {
  const host = '127.0.0.1';
  const pgAdmin = external.pgUrl ?? (bundled.pg as string);
  return {
    redis: (who: Principal) =>
      external.redisUrl ?? redisUserUrl(who, pw.redis[who], host, bundled.redis as number),
    nats: (who: Principal) =>
      external.natsUrl ?? natsUserUrl(who, pw.nats[who], host, bundled.nats as number),
    pgAdmin,
    pgOwner: external.pgUrl ?? pgUrlAs(pgAdmin, PG_OWNER, pw.postgres.owner),
    pg: (who: PgComponent) => external.pgUrl ?? pgUrlAs(pgAdmin, PG_ROLE[who], pw.postgres[who]),
  };
}

class StopRequested extends Error {}

/** The local instance supervisor: stores, registry, orchestrator and pups; runs until SIGTERM. */
export async function runDaemon(opts: DaemonOptions): Promise<number> {
  const dir = instanceDir(opts.name);
  const env = opts.env ?? process.env;
  const log = createLogger('holt-up', { instance: opts.name });
  const state: InstanceState = {
    name: opts.name,
    workspace: opts.workspace,
    holtFile: resolve(opts.file),
    supervisorPid: process.pid,
    startedAt: Date.now(),
    status: 'starting',
    components: [],
    stores: [],
  };
  let sup: Supervisor | undefined;
  let tools: LocalTools | undefined;
  /** The operator principal's connection: the registry, then workers' exit reports. */
  let board: Blackboard | undefined;
  const save = () => {
    state.components = sup?.states() ?? [];
    writeState(state);
  };
  save();
  const stores: { stop(): Promise<void> }[] = [];
  const abort = new AbortController();
  // Listen from the first moment: a `holt down` (or a timed-out `up`) during start-up must roll back,
  // not kill this process and orphan what it already started.
  const stopRequested = new AbortController();
  const onSignal = () => stopRequested.abort();
  process.once('SIGTERM', onSignal);
  process.once('SIGINT', onSignal);
  const checkStop = () => {
    if (stopRequested.signal.aborted) throw new StopRequested();
  };
  const shutdown = async (status: 'stopped' | 'failed') => {
    abort.abort();
    state.status = 'stopping';
    save();
    await sup?.stopAll();
    await board?.close().catch(() => undefined);
    await releaseTools(tools, opts.name);
    for (const s of stores.reverse()) await s.stop().catch(() => undefined);
    state.status = status;
    save();
  };
  try {
    const file = loadHoltFile(opts.file);
    mkdirSync(join(dir, 'data'), { recursive: true });
    const fileStores = file.holt.stores;
    const redisUrl = fileStores.redis.url ?? env.HOLT_REDIS_URL;
    const natsUrl = fileStores.nats.url ?? env.HOLT_NATS_URL;
    const pgUrl = fileStores.postgres.url ?? env.HOLT_DATABASE_URL;
    // Each store joins the rollback list the moment it is up, even if a sibling fails to start.
    const started = <T extends { stop(): Promise<void> }>(p: Promise<T>) =>
      p.then((s) => {
        stores.push(s);
        return s;
      });
    const pw = instanceSecrets(opts.name);
    const results = await Promise.allSettled([
      redisUrl
        ? undefined
        : started(
            startRedis({
              dir: join(dir, 'data', 'redis'),
              aof: 'everysec',
              acl: redisAclLines(opts.name, pw.redis),
              adminPassword: pw.redis.admin,
            }),
          ),
      natsUrl
        ? undefined
        : started(
            startNats({
              dir: join(dir, 'data', 'nats'),
              // Scoped to this instance, with a user per asynchronous tool (`holt tool-url --tool`).
              authorization: natsAuthorization(pw.nats, {
                instance: opts.name,
                tools: toolUsers(
                  pw.nats.tool,
                  file.agents.flatMap((a) =>
                    (a.llm?.tools ?? []).filter((t) => t.async === 'nats').map((t) => t.name),
                  ),
                ),
              }),
            }),
          ),
      pgUrl ? undefined : started(startPostgres({ dir: postgresDir(opts.name), database: 'holt' })),
    ]);
    const failed = results.find((r) => r.status === 'rejected');
    if (failed) throw (failed as PromiseRejectedResult).reason;
    const [redis, nats, pg] = results.map((r) => (r.status === 'fulfilled' ? r.value : undefined)) as [
      Awaited<ReturnType<typeof startRedis>> | undefined,
      Awaited<ReturnType<typeof startNats>> | undefined,
      Awaited<ReturnType<typeof startPostgres>> | undefined,
    ];
    checkStop();
    state.stores = [redis, nats, pg].flatMap((s) =>
      s?.proc.child.pid ? [{ name: s.proc.name, pid: s.proc.child.pid }] : [],
    );
    // Bundled stores: one user per principal (src/access); external ones: the URL given, for all.
    const as = storeUrls(
      pw,
      { redis: redis?.port, nats: nats?.port, pg: pg?.url },
      { redisUrl, natsUrl, pgUrl },
    );
    if (pg) await ensureRoles(pg.url, 'holt', pw.postgres);
    state.redisUrl = as.redis('admin');
    state.natsUrl = as.nats('admin');
    state.postgresUrl = as.pgAdmin;
    save();

    // Where each agent's tools run (its image, or this machine), ready before the registry says so.
    const prepared = await prepareTools({
      instance: opts.name,
      instanceDir: dir,
      workspace: opts.workspace,
      agents: file.agents,
      containers: opts.containers ?? true,
      runtimeImage: env.HOLT_RUNTIME_IMAGE || DEFAULT_RUNTIME_IMAGE,
      holt: holtArgv(),
      env,
    });
    tools = prepared.tools;
    checkStop();
    const bb = Blackboard.connect(as.redis('operator'), opts.name);
    board = bb;
    // With each image's digest, as Holt records it (agent_images, and on every grant).
    await setAgents(
      bb,
      file.agents.map((a) => ({ ...registrationOf(a), image_id: prepared.images[a.role] })),
    );

    // The inbox schema before any process that uses it, as its owner (the components' roles make nothing).
    await migrate(as.pgOwner, log);
    const conn = (who: 'orchestrator' | 'pup') => ({
      REDIS_URL: as.redis(who),
      NATS_URL: as.nats(who),
      DATABASE_URL: as.pg(who),
    });
    // A worker that dies is reported, as Holt's orchestrator reports a worker container's exit: the
    // watchdog frees its claim at once, and a claim that runs out of tries this way is a WorkerFailure.
    const scrub = new Scrubber([
      ...Object.values(conn('pup')),
      ...Object.values(conn('orchestrator')),
      ...Object.values(pw.redis),
      ...Object.values(pw.nats),
      ...Object.values(pw.postgres),
      ...LLM_KEY_VARS.map((k) => env[k]),
      file.holt.llm?.apiKeyEnv && env[file.holt.llm.apiKeyEnv],
    ]);
    const onCrash = (e: ComponentExit) => {
      const report = e.spec.kind === 'worker' ? workerExitReport(e, scrub) : undefined;
      if (report)
        reportWorkerExit(bb.redis, bb.k.workerExits, report).catch((err: unknown) =>
          log.warn(
            { event_type: 'worker_exit_report_failed', error: String(err) },
            'worker exit not reported',
          ),
        );
    };
    sup = new Supervisor(join(dir, 'logs'), log, save, onCrash);
    const orchPort = await freePort();
    // Living agents get the ingress (holt send, holt wake, webhooks with a `holt token`).
    const living = file.agents.some((a) => a.llm?.life);
    const ingressPort = living ? await freePort() : 0;
    if (living) state.ingressUrl = `http://127.0.0.1:${ingressPort}`;
    sup.add({
      name: 'orchestrator',
      kind: 'orchestrator',
      ...holtCommand(['orchestrator']),
      secrets: conn('orchestrator'),
      env: {
        ...componentEnvironment(env),
        HOLT_INSTANCE_NAME: opts.name,
        HOLT_HEALTH_PORT: String(orchPort),
        HOLT_MAX_REVIEW_ITERATIONS: String(file.holt.orchestrator.maxReviewIterations),
        HOLT_BID_TIMEOUT_MS: String(file.holt.orchestrator.bidTimeoutSeconds * 1000),
        ...(file.holt.orchestrator.maxBidTimeoutSeconds === undefined
          ? {}
          : { HOLT_MAX_BID_TIMEOUT_MS: String(file.holt.orchestrator.maxBidTimeoutSeconds * 1000) }),
        ...(living
          ? { HOLT_INGRESS_PORT: String(ingressPort), HOLT_INGRESS_TOKENS_FILE: ingressTokensFile(opts.name) }
          : {}),
      },
      cwd: opts.workspace,
      healthPort: orchPort,
    });
    const base = { instance: opts.name, workspace: opts.workspace, conn: conn('pup'), env, tools };
    const scaled = readScale(opts.name);
    for (const agent of file.agents)
      for (const c of await agentComponents(file, agent, { ...base, scaled: scaled[agent.role] })) sup.add(c);
    const s = sup;
    let scaling = Promise.resolve();
    process.on('SIGHUP', () => {
      // One rescale at a time: a second `holt scale` waits for the first.
      scaling = scaling
        .then(() => rescale(s, file, base, log))
        .then(save, (e: unknown) =>
          log.error({ event_type: 'scale_failed', error: String(e) }, 'scale failed'),
        );
    });

    checkStop();
    const pending = await sup.waitHealthy(opts.readyTimeoutMs ?? 30_000, stopRequested.signal);
    checkStop();
    if (pending.length)
      throw new Error(
        `not healthy in time: ${pending.join(', ')} (see ${join(dir, 'logs')})\n${sup.describe(pending)}`,
      );
    state.status = 'running';
    save();
    void sup.watchHealth(abort.signal);
  } catch (e) {
    if (e instanceof StopRequested) {
      log.info({ event_type: 'up_cancelled' }, 'stop requested during start-up; rolling back');
      await shutdown('stopped');
      return 0;
    }
    state.error = errorMessage(e);
    log.error({ event_type: 'up_failed', error: state.error }, 'start failed; rolling back');
    await shutdown('failed');
    return 1;
  }
  if (!stopRequested.signal.aborted)
    await new Promise<void>((resolve) => stopRequested.signal.addEventListener('abort', () => resolve()));
  await shutdown('stopped');
  return 0;
}
