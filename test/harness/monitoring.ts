import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

/** The Prometheus Operator release whose CRDs the tests install (from the Go module proxy). */
export const PROMETHEUS_OPERATOR = 'github.com/prometheus-operator/prometheus-operator@v0.80.1';

/**
 * The ServiceMonitor, PodMonitor and PrometheusRule CRDs, as files of the Prometheus Operator's Go
 * module (its example/prometheus-operator-crd directory), downloaded once into Go's module cache.
 */
export async function monitoringCrds(): Promise<string[]> {
  const { stdout } = await run('go', ['mod', 'download', '-json', PROMETHEUS_OPERATOR], {
    env: { ...process.env, GOFLAGS: '-mod=mod' },
    maxBuffer: 1024 * 1024,
  });
  const { Dir } = JSON.parse(stdout) as { Dir: string };
  return ['servicemonitors', 'podmonitors', 'prometheusrules'].map((k) =>
    join(Dir, 'example', 'prometheus-operator-crd', `monitoring.coreos.com_${k}.yaml`),
  );
}
