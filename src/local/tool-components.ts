import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { chmodSync, mkdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { HoltFileAgent } from '../api/holtfile.ts';
import {
  type ContainerLimits,
  containerLimits,
  detectEngine,
  type Engine,
  engineRun,
  ensureBundle,
  ensureNetwork,
  imageDigest,
  removeInstanceContainers,
} from './engine.ts';
import type { ComponentSpec } from './supervisor.ts';
import {
  CONTAINER_WORKSPACE,
  containerName,
  containerRunArgs,
  readOnlyRunnerArgs,
  runnerSocket,
  toolsPlan,
  toolVariables,
} from './tools.ts';

/** How an instance runs its agents' tools, settled once before any component starts. */
export interface LocalTools {
  containers?: { engine: Engine; bundle: string; network: string; user?: string; limits: ContainerLimits };
  /** Short host directory holding each tools component's socket directory (unix paths are short). */
  runRoot: string;
  root: boolean;
  /** This machine's `holt` command (argv), for a tool runner on the host. */
  holt: string[];
}

/** A tools component is named after its pup with this suffix. */
export const TOOLS_SUFFIX = '-tools';

/** Variables the engine's CLI itself needs to find its daemon (never a store or model credential). */
const ENGINE_ENV = ['DOCKER_HOST', 'DOCKER_CONFIG', 'DOCKER_CONTEXT', 'CONTAINER_HOST', 'XDG_RUNTIME_DIR'];

export interface ToolsInput {
  instance: string;
  component: string;
  role: string;
  image?: string;
  mode: 'ro' | 'rw';
  workspace: string;
  /** The pup's literal environment: the contract and the agent's declared variables come from it. */
  pupEnv: Record<string, string>;
  /** `holt up`'s environment without credentials. */
  env: Record<string, string>;
}

/**
 * The tools component of one pup (or none: its tools run as its children) and what the pup then
 * needs to reach it. The runner gets no store URL and no model key, in a container or not.
 */
export function toolsComponent(
  t: LocalTools,
  c: ToolsInput,
): { spec: ComponentSpec; pupEnv: Record<string, string> } | undefined {
  const plan = toolsPlan(c.image, c.mode, t.containers !== undefined);
  if (plan.kind === 'host') return undefined;
  const runDir = join(t.runRoot, c.component);
  const name = `${c.component}${TOOLS_SUFFIX}`;
  const prepareDir = () => {
    mkdirSync(runDir, { recursive: true });
    // Any user of the image may listen here; the root above it is this user's alone.
    chmodSync(runDir, 0o777);
    rmSync(runnerSocket(runDir), { force: true });
  };
  const base = { name, kind: 'tools' as const, role: c.role, cwd: c.workspace };
  const pupEnv: Record<string, string> = { HOLT_TOOL_RUNNER_SOCKET: runnerSocket(runDir) };
  if (plan.kind === 'readonly') {
    const vars = toolVariables(c.pupEnv, c.workspace);
    const cmd = readOnlyRunnerArgs(
      c.workspace,
      [...t.holt, 'tool-runner', '--socket', runnerSocket(runDir)],
      t.root,
    );
    return {
      spec: { ...base, ...cmd, env: { ...c.env, ...vars }, prepare: async () => prepareDir() },
      pupEnv,
    };
  }
  const k = t.containers as NonNullable<LocalTools['containers']>;
  const vars = toolVariables(c.pupEnv, CONTAINER_WORKSPACE);
  const engineEnv = Object.fromEntries(
    ENGINE_ENV.flatMap((v) => (process.env[v] ? [[v, process.env[v] as string]] : [])),
  );
  return {
    spec: {
      ...base,
      command: k.engine.bin,
      args: containerRunArgs({
        instance: c.instance,
        component: c.component,
        role: c.role,
        image: plan.image,
        workspace: c.workspace,
        mode: c.mode,
        runDir,
        bundleVolume: k.bundle,
        network: k.network,
        variables: Object.keys(vars),
        user: k.user,
        limits: k.limits,
      }),
      env: { ...c.env, ...engineEnv, ...vars },
      prepare: async () => {
        prepareDir();
        // A container a killed run left behind holds the name.
        await engineRun(k.engine, ['rm', '-f', '-v', containerName(c.instance, c.component)]).catch(
          () => undefined,
        );
      },
    },
    pupEnv: { ...pupEnv, HOLT_TOOL_WORKSPACE: CONTAINER_WORKSPACE },
  };
}

/** The images an agent's components run: its own, and its workers' when they name another. */
export function agentImages(a: HoltFileAgent): string[] {
  return [...new Set([a.image, a.worker?.image].filter((i): i is string => !!i))];
}

/** Whether a read-only view of the workspace can be made here (the exact wrapper, running `true`). */
function readOnlyWorks(workspace: string, root: boolean): Promise<string | undefined> {
  const { command, args } = readOnlyRunnerArgs(workspace, ['true'], root);
  return new Promise((resolve) =>
    execFile(command, args, { timeout: 15_000 }, (err, _o, stderr) =>
      resolve(err ? stderr.trim().split('\n').at(-1) || err.message : undefined),
    ),
  );
}

export interface PreparedTools {
  tools: LocalTools;
  /** role → the digest of the image it runs (Holt's agent_images), for agents in containers. */
  images: Record<string, string>;
}

/**
 * Settles where each agent's tools run and readies it: the engine, the runtime bundle, the instance's
 * network and every image's digest (containers); the read-only workspace view (host). Refuses, with
 * what to do, when an agent cannot run as its file says.
 */
export async function prepareTools(o: {
  instance: string;
  instanceDir: string;
  workspace: string;
  agents: HoltFileAgent[];
  containers: boolean;
  runtimeImage: string;
  holt: string[];
  env: NodeJS.ProcessEnv;
}): Promise<PreparedTools> {
  const root = process.getuid?.() === 0;
  const hash = createHash('sha256').update(o.instanceDir).digest('hex').slice(0, 10);
  const parent = join(tmpdir(), `holt-${process.getuid?.() ?? 'user'}`);
  mkdirSync(parent, { recursive: true, mode: 0o700 });
  rmSync(join(parent, hash), { recursive: true, force: true });
  const runRoot = join(parent, hash);
  mkdirSync(runRoot, { mode: 0o700 });
  const tools: LocalTools = { runRoot, root, holt: o.holt };
  const images: Record<string, string> = {};
  const imaged = o.agents.filter((a) => agentImages(a).length);
  if (o.containers && imaged.length) {
    const limits = containerLimits(o.env);
    const engine = await detectEngine(o.env);
    if (!engine)
      throw new Error(
        `${imaged.map((a) => a.role).join(', ')} run in their images and need Docker or Podman, and none answers: start one, or pass --no-containers to run their commands on this machine`,
      );
    await removeInstanceContainers(engine, o.instance);
    for (const a of imaged) {
      const digests = await Promise.all(agentImages(a).map((i) => imageDigest(engine, i)));
      images[a.role] = digests[0] as string;
    }
    const bundle = await ensureBundle(engine, o.runtimeImage);
    const network = await ensureNetwork(engine, o.instance);
    // Not root: the tools run as this user, so what they write in the workspace stays this user's.
    const user = root ? undefined : `${process.getuid?.()}:${process.getgid?.()}`;
    tools.containers = { engine, bundle, network, user, limits };
  }
  const hostRo = o.agents.filter((a) => {
    const onHost = !tools.containers || !agentImages(a).length;
    return onHost && (a.workspace.mode === 'ro' || a.worker?.workspaceMode === 'ro');
  });
  if (hostRo.length) {
    const why = await readOnlyWorks(o.workspace, root);
    if (why)
      throw new Error(
        `${hostRo.map((a) => a.role).join(', ')}: workspace mode ro cannot be enforced on this machine (a read-only mount namespace failed: ${why}); run them in their images with a container engine, or set workspace: {mode: rw}`,
      );
  }
  return { tools, images };
}

/** Takes an instance's containers and network away (its stop, or a failed start). */
export async function releaseTools(t: LocalTools | undefined, instance: string): Promise<void> {
  if (t?.containers) await removeInstanceContainers(t.containers.engine, instance).catch(() => undefined);
  if (t) rmSync(t.runRoot, { recursive: true, force: true });
}
