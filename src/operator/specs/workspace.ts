import type { HoltSpec } from '../../api/holt.ts';
import type { KubeObject } from '../runtime/kube.ts';
import { childName, labels, meta, type Owner } from './meta.ts';

export const workspaceClaim = (holt: string) => childName(holt, 'workspace');
export const WORKSPACE_PATH = '/workspace';

/** The shared workspace PVC the agents mount read-only or read-write. */
export function workspacePvc(owner: Owner, ws: HoltSpec['workspace']): KubeObject {
  const name = workspaceClaim(owner.name);
  return {
    apiVersion: 'v1',
    kind: 'PersistentVolumeClaim',
    metadata: meta(name, owner, labels(owner.name, name, 'workspace')),
    spec: {
      accessModes: [ws.accessMode],
      resources: { requests: { storage: ws.size } },
      ...(ws.storageClassName ? { storageClassName: ws.storageClassName } : {}),
    },
  };
}
