import { basename, dirname } from 'node:path';
import { stringify } from 'yaml';
import { k8sName, manifestsFromHoltFile } from '../../api/manifests.ts';
import { err, out } from '../output.ts';
import { readHoltFile } from '../resolve.ts';

export function convert(file: string, opts: { name?: string; namespace?: string }): void {
  const holt = readHoltFile(file);
  for (const w of holt.warnings) err(`warning: ${w}`);
  const name = k8sName(opts.name ?? holt.name ?? (basename(dirname(file)) || 'holt'));
  out(
    manifestsFromHoltFile(holt, name, opts.namespace)
      .map((d) => stringify(d))
      .join('---\n')
      .trimEnd(),
  );
}
