import { posix } from 'node:path';

/**
 * A container's view of the filesystem mapped onto local directories: each mount path (a volume
 * mount, or a path the image is known to contain) to the local directory standing in for it.
 */
export type PathMap = ReadonlyMap<string, string>;

const escapeRe = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/**
 * Rewrites every occurrence of a mapped container path in `text` to its local directory, in one
 * pass (a rewritten path is never rewritten again). A path matches only as a whole path prefix:
 * preceded by the start or a non-path character (quote, space, `=`, `:`, `[`, `,`) and followed by
 * the end, `/` or a non-path character, so `/opt/holt` does not match `/opt/holt-demo`. The longest
 * mount wins, as in a real mount table (`/workspace/cache` over `/workspace`).
 */
export function rewritePaths(text: string, map: PathMap): string {
  const norm = new Map<string, string>();
  for (const [m, dir] of map) {
    const k = posix.normalize(m).replace(/(.)\/$/, '$1');
    if (k !== '/') norm.set(k, dir);
  }
  if (norm.size === 0) return text;
  const mounts = [...norm.keys()].sort((a, b) => b.length - a.length);
  const re = new RegExp(`(?<![\\w.~/-])(${mounts.map(escapeRe).join('|')})(?![\\w.~-])`, 'g');
  return text.replace(re, (m: string) => norm.get(m) ?? m);
}
