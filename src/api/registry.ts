import type { AgentRegistration } from '../blackboard/types.ts';
import { type AgentSpec, isScalable, workerTargetOf } from './agent.ts';

/** The runtime registry entry the orchestrator reads for one agent (written by holt up or the operator). */
export function registrationOf(agent: AgentSpec & { role: string }): AgentRegistration {
  const a2a = agent.ingress?.enabled && agent.ingress.a2a.enabled ? agent.ingress.a2a : undefined;
  const card = a2a ? { a2a: { description: a2a.description, skills: a2a.skills } } : {};
  if (!isScalable(agent)) return { role: agent.role, kind: 'standard', ...card };
  return {
    ...card,
    role: agent.role,
    kind: 'scalable',
    worker_target: workerTargetOf(agent, agent.role),
    max_concurrent: agent.worker?.maxConcurrent ?? agent.replicas,
  };
}
