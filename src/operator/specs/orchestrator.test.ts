import { describe, expect, it } from 'vitest';
import { HoltSpec } from '../../api/holt.ts';
import type { KubeObject } from '../kube/kube.ts';
import { ownerOf } from './meta.ts';
import { orchestratorDeployment } from './orchestrator.ts';

const owner = ownerOf({
  apiVersion: 'holt.io/v1alpha1',
  kind: 'Holt',
  metadata: { name: 'demo', namespace: 'ns', uid: 'u1' },
});
type Pod = { spec: { template: { spec: { containers: { resources?: unknown }[] } } } };
const resourcesOf = (o: KubeObject) => (o as unknown as Pod).spec.template.spec.containers[0]?.resources;

describe('orchestrator Deployment resources', () => {
  it('by default a small request, a memory limit and no CPU limit (V8 helper threads may use spare cores)', () => {
    expect(resourcesOf(orchestratorDeployment(owner, HoltSpec.parse({}), 'img'))).toEqual({
      requests: { cpu: '50m', memory: '128Mi' },
      limits: { memory: '512Mi' },
    });
  });

  it('spec.orchestrator.resources replaces them', () => {
    const resources = { requests: { cpu: '1500m', memory: '256Mi' }, limits: { memory: '1Gi' } };
    const spec = HoltSpec.parse({ orchestrator: { resources } });
    expect(resourcesOf(orchestratorDeployment(owner, spec, 'img'))).toEqual(resources);
  });
});

describe('orchestrator Deployment bid windows', () => {
  type Env = { spec: { template: { spec: { containers: { env: { name: string; value?: string }[] }[] } } } };
  const envOf = (o: KubeObject) =>
    Object.fromEntries(
      (o as unknown as Env).spec.template.spec.containers[0]!.env.map((e) => [e.name, e.value]),
    );
  it('spec.orchestrator.maxBidTimeoutSeconds becomes HOLT_MAX_BID_TIMEOUT_MS; unset, the orchestrator defaults it', () => {
    const set = envOf(
      orchestratorDeployment(
        owner,
        HoltSpec.parse({ orchestrator: { bidTimeoutSeconds: 5, maxBidTimeoutSeconds: 42.5 } }),
        'img',
      ),
    );
    expect(set).toMatchObject({ HOLT_BID_TIMEOUT_MS: '5000', HOLT_MAX_BID_TIMEOUT_MS: '42500' });
    expect(envOf(orchestratorDeployment(owner, HoltSpec.parse({}), 'img'))).not.toHaveProperty(
      'HOLT_MAX_BID_TIMEOUT_MS',
    );
  });
});

describe('Prometheus scrape hints', () => {
  it("are on the orchestrator's pod template (where annotation-based scrape configs look), naming the health port", () => {
    const dep = orchestratorDeployment(owner, HoltSpec.parse({}), 'img') as unknown as {
      metadata: { annotations?: Record<string, string> };
      spec: { template: { metadata: { annotations?: Record<string, string> } } };
    };
    expect(dep.spec.template.metadata.annotations).toEqual({
      'prometheus.io/scrape': 'true',
      'prometheus.io/port': '8080',
      'prometheus.io/path': '/metrics',
    });
    expect(dep.metadata.annotations?.['prometheus.io/port']).toBeUndefined();
  });
});
