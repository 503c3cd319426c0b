import { join } from 'node:path';
import { CONTRACT_ENV, TOOL_ENV_NAMES } from '../common/secrets.ts';
import { type ContainerLimits, INSTANCE_LABEL } from './engine.ts';

/**
 * Where a local agent's tools run (its tool, bid script and health check), beside the pup that
 * holds the credentials:
 *   container: a container of the agent's image running the bundle's tool runner (as Holt runs
 *              agents in their images, and as the agent container of a pod does);
 *   readonly:  a tool runner on this machine in a mount namespace where the workspace is read-only;
 *   host:      children of the pup itself (a read-write workspace needs nothing more).
 */
export type ToolsPlan = { kind: 'container'; image: string } | { kind: 'readonly' } | { kind: 'host' };

/** The pure choice for one component. */
export function toolsPlan(image: string | undefined, mode: 'ro' | 'rw', containers: boolean): ToolsPlan {
  if (containers && image) return { kind: 'container', image };
  return mode === 'ro' ? { kind: 'readonly' } : { kind: 'host' };
}

/** Where a container sees the workspace, as in a pod. */
export const CONTAINER_WORKSPACE = '/workspace';
/** Where a container finds the runtime bundle, as in a pod. */
export const CONTAINER_BUNDLE = '/opt/holt';
const CONTAINER_RUN_DIR = '/run/holt';

/** The socket a component's tool runner listens on, under the host directory given to it. */
export const runnerSocket = (runDir: string) => join(runDir, 'runner.sock');

/**
 * The tools' environment: the contract variables and the ones the agent declares, never a store or
 * model credential. Values stay in the engine CLI's own environment (`-e NAME`), out of every argv.
 */
export function toolVariables(pupEnv: Record<string, string>, workspace: string): Record<string, string> {
  const declared = JSON.parse(pupEnv[TOOL_ENV_NAMES] ?? '[]') as string[];
  const out: Record<string, string> = {};
  for (const k of [...CONTRACT_ENV, TOOL_ENV_NAMES, ...declared])
    if (pupEnv[k] !== undefined) out[k] = pupEnv[k];
  out.HOLT_WORKSPACE = workspace;
  return out;
}

export interface ContainerInput {
  instance: string;
  component: string;
  role: string;
  image: string;
  workspace: string;
  mode: 'ro' | 'rw';
  /** Host directory for the runner's socket (shared with the pup). */
  runDir: string;
  bundleVolume: string;
  network: string;
  variables: string[];
  /** uid:gid to run as; undefined keeps the image's own user. */
  user?: string;
  limits: ContainerLimits;
}

/** The container's name: the engine's names are global, so the instance is part of it. */
export const containerName = (instance: string, component: string) => `holt-${instance}-${component}`;

/** `docker run` arguments of a component's tool container (attached: the supervisor owns its life). */
export function containerRunArgs(c: ContainerInput): string[] {
  return [
    'run',
    '--rm',
    '--name',
    containerName(c.instance, c.component),
    '--label',
    `${INSTANCE_LABEL}=${c.instance}`,
    '--label',
    `holt.role=${c.role}`,
    '--network',
    c.network,
    ...(c.user ? ['--user', c.user] : []),
    // As the agent container of a pod: no capability, no privilege gained through setuid, a read-only
    // root with a writable /tmp; and bounded, so a fork bomb or a leak stops at the container. /tmp is
    // an anonymous volume, which starts with what the image has there (a tmpfs would hide it: Holt
    // images may keep their tools under /tmp); it goes with the container (`run --rm`, `rm -v`).
    '--cap-drop',
    'ALL',
    '--security-opt',
    'no-new-privileges',
    '--read-only',
    '-v',
    '/tmp',
    '--pids-limit',
    String(c.limits.pids),
    '--memory',
    c.limits.memory,
    '-v',
    `${c.bundleVolume}:${CONTAINER_BUNDLE}:ro`,
    '-v',
    `${c.workspace}:${CONTAINER_WORKSPACE}${c.mode === 'ro' ? ':ro' : ''}`,
    '-v',
    `${c.runDir}:${CONTAINER_RUN_DIR}`,
    '-w',
    CONTAINER_WORKSPACE,
    ...c.variables.flatMap((v) => ['-e', v]),
    '--entrypoint',
    `${CONTAINER_BUNDLE}/bin/holt`,
    c.image,
    'tool-runner',
    '--socket',
    runnerSocket(CONTAINER_RUN_DIR),
  ];
}

/**
 * A tool runner on this machine that sees the workspace read-only. Two namespaces: a mount namespace
 * (unshare; as this user, in a user namespace mapping it to root, which mounting needs) where the
 * workspace is bound onto itself read-only, then a new user and mount namespace for the runner. The
 * kernel locks every mount a less privileged namespace inherits (MNT_LOCKED), so the tools, root of
 * their own namespace, can neither unmount the view, remount it read-write, nor bind its parent
 * without it; and, in another user namespace, they cannot reach this user's processes through
 * /proc (their environment, /proc/<pid>/root). Files they write elsewhere still belong to this user.
 */
export function readOnlyRunnerArgs(
  workspace: string,
  runner: string[],
  root: boolean,
): { command: string; args: string[] } {
  return {
    command: 'unshare',
    args: [
      '--mount',
      ...(root ? [] : ['--map-root-user']),
      '--',
      'sh',
      '-c',
      'ws=$1; shift; mount --bind -o ro "$ws" "$ws" && exec unshare --user --map-root-user --mount -- "$@"',
      'holt-ro-workspace',
      workspace,
      ...runner,
    ],
  };
}
