import type { AgentRegistration } from '../blackboard/types.ts';
import { type AgentSpec, isScalable, workerTargetOf } from './agent.ts';

/** The runtime registry entry the orchestrator reads for one agent (written by holt up or the operator). */
export function registrationOf(agent: AgentSpec & { role: string }): AgentRegistration {
  if (!isScalable(agent)) return { role: agent.role, kind: 'standard' };
  return {
    role: agent.role,
    kind: 'scalable',
    worker_target: workerTargetOf(agent, agent.role),
    max_concurrent: agent.worker?.maxConcurrent ?? agent.replicas,
  };
}
