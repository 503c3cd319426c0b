import { execFile } from 'node:child_process';
import { z } from 'zod';

/** A container engine's CLI (Docker's or Podman's: the commands used here are the same). */
export interface Engine {
  name: 'docker' | 'podman';
  bin: string;
}

/** The label every container, network and volume of an instance carries, so it can be swept up. */
export const INSTANCE_LABEL = 'holt.instance';

export class EngineError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'EngineError';
  }
}

/** Runs the engine's CLI; rejects with its stderr (one line) on a non-zero exit. */
export function engineRun(e: Engine, args: string[], timeoutMs = 120_000): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(e.bin, args, { timeout: timeoutMs, maxBuffer: 16 << 20 }, (err, stdout, stderr) => {
      if (!err) return resolve(stdout);
      const why = stderr.trim().split('\n').at(-1) || err.message;
      reject(new EngineError(`${e.bin} ${args.slice(0, 2).join(' ')}: ${why}`));
    });
  });
}

/**
 * The engine to run agents' images with: HOLT_CONTAINER_ENGINE (docker or podman, or a path to one)
 * when set, else the first of docker and podman that answers. Undefined when none does.
 */
export async function detectEngine(env: NodeJS.ProcessEnv): Promise<Engine | undefined> {
  const wanted = env.HOLT_CONTAINER_ENGINE?.trim();
  const tries: Engine[] = wanted
    ? [{ name: wanted.endsWith('podman') ? 'podman' : 'docker', bin: wanted }]
    : [
        { name: 'docker', bin: 'docker' },
        { name: 'podman', bin: 'podman' },
      ];
  for (const e of tries) {
    try {
      await engineRun(e, ['info', '--format', '{{.ID}}'], 15_000);
      return e;
    } catch {
      // not installed, or its daemon is not running
    }
  }
  return undefined;
}

const ImageInspect = z.array(
  z.object({ Id: z.string(), RepoDigests: z.array(z.string()).nullish() }).passthrough(),
);

/**
 * What Holt records for an agent's image: its registry digest (repo@sha256:…) when it has one, else
 * the local image ID (sha256:…). Throws when the image is not on this machine.
 */
export async function imageDigest(e: Engine, image: string): Promise<string> {
  let raw: string;
  try {
    raw = await engineRun(e, ['image', 'inspect', image]);
  } catch {
    throw new EngineError(
      `image ${image} is not on this machine: build it (${e.name} build -t ${image} …) or pull it`,
    );
  }
  const [info] = ImageInspect.parse(JSON.parse(raw));
  if (!info) throw new EngineError(`image ${image}: ${e.name} image inspect returned nothing`);
  return info.RepoDigests?.[0] ?? info.Id;
}

/**
 * The runtime bundle (/opt/holt of the runtime image: node, the holt program, the tool runner) in a
 * volume, copied once per runtime image, exactly as the Kubernetes init container copies it. Agent
 * containers mount it read-only. Returns the volume's name.
 */
export async function ensureBundle(e: Engine, runtimeImage: string): Promise<string> {
  const id = await imageDigest(e, runtimeImage).catch(() => {
    throw new EngineError(
      `the runtime image ${runtimeImage} is not on this machine: \`make images\` builds it (HOLT_RUNTIME_IMAGE names another)`,
    );
  });
  const volume = `holt-bundle-${id.replace(/^.*sha256:/, '').slice(0, 16)}`;
  const have = await engineRun(e, ['volume', 'ls', '-q', '--filter', `name=^${volume}$`]);
  if (have.split('\n').includes(volume)) return volume;
  // A failed copy removes the volume, so a half-filled bundle is never taken for a whole one.
  await engineRun(e, ['volume', 'create', '--label', 'holt.bundle=1', volume]);
  try {
    await engineRun(e, [
      'run',
      '--rm',
      '--network',
      'none',
      '--user',
      '0:0',
      '-v',
      `${volume}:/holt`,
      '--entrypoint',
      'cp',
      runtimeImage,
      '-a',
      '/opt/holt/.',
      '/holt/',
    ]);
  } catch (err) {
    await engineRun(e, ['volume', 'rm', '-f', volume]).catch(() => undefined);
    throw err;
  }
  return volume;
}

/** The instance's own network: its agent containers share it and reach nothing of another instance. */
export async function ensureNetwork(e: Engine, instance: string): Promise<string> {
  const name = `holt-${instance}`;
  const have = await engineRun(e, ['network', 'ls', '-q', '--filter', `name=^${name}$`]);
  if (!have.trim())
    await engineRun(e, ['network', 'create', '--label', `${INSTANCE_LABEL}=${instance}`, name]);
  return name;
}

/** Removes every container and the network of an instance (a crashed supervisor's leftovers too). */
export async function removeInstanceContainers(e: Engine, instance: string): Promise<void> {
  const ids = (await engineRun(e, ['ps', '-aq', '--filter', `label=${INSTANCE_LABEL}=${instance}`])).split(
    /\s+/,
  );
  const live = ids.filter(Boolean);
  // -v: their anonymous /tmp volumes too.
  if (live.length) await engineRun(e, ['rm', '-f', '-v', ...live]);
  await engineRun(e, ['network', 'rm', `holt-${instance}`]).catch(() => undefined);
}

/** What each agent container may use (`docker run --memory`, `--pids-limit`). */
export interface ContainerLimits {
  memory: string;
  pids: number;
}

const ContainerLimitsEnv = z.object({
  HOLT_CONTAINER_MEMORY: z
    .string()
    .trim()
    .regex(/^[1-9][0-9]*[bkmg]?$/i, 'a size such as 512m or 4g')
    .default('4g'),
  HOLT_CONTAINER_PIDS: z.coerce.number().int().min(16).max(4_194_304).default(4096),
});

/** The agent containers' limits from the environment; a bad value is refused with what is wanted. */
export function containerLimits(env: NodeJS.ProcessEnv): ContainerLimits {
  const r = ContainerLimitsEnv.safeParse({
    HOLT_CONTAINER_MEMORY: env.HOLT_CONTAINER_MEMORY || undefined,
    HOLT_CONTAINER_PIDS: env.HOLT_CONTAINER_PIDS || undefined,
  });
  if (!r.success)
    throw new EngineError(r.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; '));
  return { memory: r.data.HOLT_CONTAINER_MEMORY, pids: r.data.HOLT_CONTAINER_PIDS };
}
