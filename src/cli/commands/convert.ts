import { basename, dirname } from 'node:path';
import { stringify } from 'yaml';
import { HoltFileError, loadHoltFile } from '../../api/holtfile.ts';
import { k8sName, manifestsFromHoltFile } from '../../api/manifests.ts';
import { CliError, EXIT, err, out } from '../output.ts';

export function convert(file: string, opts: { name?: string; namespace?: string }): void {
  let holt: ReturnType<typeof loadHoltFile>;
  try {
    holt = loadHoltFile(file);
  } catch (e) {
    if (e instanceof HoltFileError) throw new CliError(e.message, EXIT.usage);
    throw e;
  }
  for (const w of holt.warnings) err(`warning: ${w}`);
  const name = k8sName(opts.name ?? holt.name ?? (basename(dirname(file)) || 'holt'));
  out(
    manifestsFromHoltFile(holt, name, opts.namespace)
      .map((d) => stringify(d))
      .join('---\n')
      .trimEnd(),
  );
}
