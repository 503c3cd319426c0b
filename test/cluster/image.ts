import { createHash } from 'node:crypto';
import { chmodSync, copyFileSync, mkdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { sh } from './sh.ts';

export interface ImageFile {
  /** Absolute path inside the image. */
  path: string;
  /** A file copied from the host, or a symlink target. */
  from?: string;
  link?: string;
  mode?: number;
}

export interface ImageSpec {
  ref: string;
  files: ImageFile[];
  entrypoint: string[];
  user?: string;
}

/**
 * An image of a few files (a static binary and what it needs) as a `docker save` archive, which
 * `ctr images import` loads: the cluster's own parts (pause, CoreDNS, the provisioner and its helper)
 * need no container engine and no registry.
 */
export function writeImageArchive(spec: ImageSpec, workDir: string): string {
  const root = join(workDir, 'rootfs');
  mkdirSync(root, { recursive: true });
  for (const f of spec.files) {
    const dest = join(root, f.path);
    mkdirSync(dirname(dest), { recursive: true });
    if (f.link) symlinkSync(f.link, dest);
    else if (f.from) {
      copyFileSync(f.from, dest);
      chmodSync(dest, f.mode ?? 0o755);
    }
  }
  mkdirSync(join(root, 'tmp'), { recursive: true, mode: 0o1777 });
  chmodSync(join(root, 'tmp'), 0o1777);
  const out = join(workDir, 'archive');
  mkdirSync(out, { recursive: true });
  const layer = join(out, 'layer.tar');
  // Fixed owner and times: the same files give the same layer digest.
  sh('tar', [
    '--numeric-owner',
    '--owner=0',
    '--group=0',
    '--mtime=@0',
    '--sort=name',
    '-C',
    root,
    '-cf',
    layer,
    '.',
  ]);
  const diffId = `sha256:${createHash('sha256').update(readFileSync(layer)).digest('hex')}`;
  const config = JSON.stringify({
    architecture: 'amd64',
    os: 'linux',
    config: {
      Entrypoint: spec.entrypoint,
      User: spec.user ?? '',
      Env: ['PATH=/usr/local/bin:/usr/bin:/bin'],
    },
    rootfs: { type: 'layers', diff_ids: [diffId] },
    history: [{ created_by: 'holt test/cluster/image.ts' }],
  });
  const configName = `${createHash('sha256').update(config).digest('hex')}.json`;
  writeFileSync(join(out, configName), config);
  writeFileSync(
    join(out, 'manifest.json'),
    JSON.stringify([{ Config: configName, RepoTags: [spec.ref], Layers: ['layer.tar'] }]),
  );
  const tar = join(workDir, 'image.tar');
  sh('tar', ['-C', out, '-cf', tar, 'manifest.json', configName, 'layer.tar']);
  return tar;
}
