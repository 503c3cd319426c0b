import type { KubeObject } from '../kube/kube.ts';
import { childName, labels, meta, type Owner } from './meta.ts';

export const orchestratorAccount = (holt: string) => childName(holt, 'orchestrator');
export const agentAccount = (holt: string) => childName(holt, 'agent');

/**
 * The Holt's ServiceAccounts. Neither the orchestrator nor the pups talk to the Kubernetes API,
 * so no token is mounted and no Role is bound: a compromised agent has no cluster credentials.
 */
export function serviceAccounts(owner: Owner): KubeObject[] {
  return [
    [orchestratorAccount(owner.name), 'orchestrator'],
    [agentAccount(owner.name), 'agent'],
  ].map(([name, component]) => ({
    apiVersion: 'v1',
    kind: 'ServiceAccount',
    metadata: meta(name as string, owner, labels(owner.name, name as string, component as string)),
    automountServiceAccountToken: false,
  }));
}
