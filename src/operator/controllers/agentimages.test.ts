import { describe, expect, it } from 'vitest';
import type { KubeObject } from '../kube/kube.ts';
import { AgentImages, agentImageOf } from './agentimages.ts';

const pod = (uid: string, component: string, imageID?: string) =>
  ({
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      name: `p-${uid}`,
      namespace: 'team',
      uid,
      labels: {
        'holt.io/instance': 'dev',
        'holt.io/role': 'Coder',
        'app.kubernetes.io/component': component,
      },
    },
    status: { initContainerStatuses: [{ name: 'agent', ...(imageID ? { imageID } : {}) }] },
  }) as KubeObject;

const D1 = `ghcr.io/x/coder@sha256:${'1'.repeat(64)}`;
const D2 = `sha256:${'2'.repeat(64)}`;

describe("Holt's image audit on Kubernetes", () => {
  it("reads the agent container's digest of a bidding pod, not a worker's, not before it is pulled", () => {
    expect(agentImageOf(pod('a', 'agent', `docker-pullable://${D1}`))).toEqual({
      holt: { namespace: 'team', name: 'dev' },
      role: 'Coder',
      image: D1,
    });
    expect(agentImageOf(pod('a', 'controller', D2))?.image).toBe(D2);
    expect(agentImageOf(pod('a', 'worker', D2))).toBeUndefined();
    expect(agentImageOf(pod('a', 'agent'))).toBeUndefined();
  });

  it('tells its Holt when a role runs another digest, and only then', () => {
    const changed: string[] = [];
    const images = new AgentImages((h) => changed.push(`${h.namespace}/${h.name}`));
    const holt = { namespace: 'team', name: 'dev' };
    images.onPod('add', pod('a', 'agent'));
    expect(changed).toEqual([]);
    images.onPod('update', pod('a', 'agent', D1));
    images.onPod('update', pod('a', 'agent', D1));
    expect(images.get(holt, 'Coder')).toBe(D1);
    expect(changed).toEqual(['team/dev']);
    // A rollout: the new pod runs another image; the old one goes.
    images.onPod('add', pod('b', 'agent', D2));
    images.onPod('delete', pod('a', 'agent', D1));
    expect(images.get(holt, 'Coder')).toBe(D2);
    images.onPod('delete', pod('b', 'agent', D2));
    expect(images.get(holt, 'Coder')).toBeUndefined();
    expect(changed).toEqual(['team/dev', 'team/dev', 'team/dev']);
  });
});
