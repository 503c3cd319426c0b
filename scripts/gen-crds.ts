// Writes crds/*.yaml, the Helm chart's copy and examples/k8s/demo.yaml from the zod schemas in src/api (`make crds`).
import { mkdirSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { CHART_CRD_DIR, generatedFiles } from '../src/api/crd/generate.ts';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const files = generatedFiles(root);
// Drop files of kinds that no longer exist, so the directories hold exactly what is generated.
for (const dir of ['crds', CHART_CRD_DIR]) {
  mkdirSync(join(root, dir), { recursive: true });
  for (const f of readdirSync(join(root, dir)))
    if (f.endsWith('.yaml') && !files.has(`${dir}/${f}`)) rmSync(join(root, dir, f));
}
mkdirSync(join(root, 'examples/k8s'), { recursive: true });
for (const [path, content] of files) {
  writeFileSync(join(root, path), content);
  process.stdout.write(`wrote ${path}\n`);
}
