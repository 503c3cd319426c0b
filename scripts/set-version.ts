// `make version V=x.y.z`: the release version lives in package.json; this writes it there and into
// the chart (version, appVersion), which Helm needs literally. Images are tagged from package.json
// (scripts/images.sh), the CLI and the operator's default runtime image read it at run time.
// test/chart.test.ts fails when the chart and package.json disagree.
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

const root = join(import.meta.dirname, '..');
const version = process.argv[2];
if (!version || !/^\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?$/.test(version)) {
  process.stderr.write('usage: node scripts/set-version.ts <semver>, e.g. 0.2.0\n');
  process.exit(2);
}
const pkgFile = join(root, 'package.json');
const pkg = readFileSync(pkgFile, 'utf8').replace(/^ {2}"version": ".*",$/m, `  "version": "${version}",`);
writeFileSync(pkgFile, pkg);
const chartFile = join(root, 'charts', 'holt-operator', 'Chart.yaml');
const chart = readFileSync(chartFile, 'utf8')
  .replace(/^version: .*$/m, `version: ${version}`)
  .replace(/^appVersion: .*$/m, `appVersion: "${version}"`);
writeFileSync(chartFile, chart);
process.stdout.write(
  `version ${version}: package.json, charts/holt-operator/Chart.yaml (run make crds for the examples)\n`,
);
