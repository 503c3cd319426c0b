import { readFileSync } from 'node:fs';

/**
 * The project's version, from package.json: the one place it is written. Found beside the compiled
 * tree in the images (/opt/holt/app/package.json) or at the repository root in development.
 */
function readVersion(): string {
  for (const rel of ['../package.json', '../../package.json']) {
    try {
      const pkg = JSON.parse(readFileSync(new URL(rel, import.meta.url), 'utf8')) as {
        name?: string;
        version?: string;
      };
      if (pkg.name === 'holt-k8s' && pkg.version) return pkg.version;
    } catch {
      // not there: try the next place
    }
  }
  return '0.0.0-unknown';
}

export const VERSION = readVersion();
