import { v5 as uuidv5 } from 'uuid';

// A fixed namespace: the same inputs give the same ids in every process and every release.
const NAMESPACE = 'a6f1c7e2-4b0d-5c3e-9f8a-1d2b3c4e5f60';

/** The actor made for one claim of one role (one per claim; minted when the grant is enqueued, never by a worker: docs/agent-worker.md § The inbox). */
export function actorIdOf(instance: string, claimId: string, role: string): string {
  return uuidv5(`actor/${instance}/${claimId}/${role}`, NAMESPACE);
}

/** The turn for one grant (claim, role, phase): re-dispatching the same grant finds the same turn. */
export function turnIdOf(instance: string, claimId: string, role: string, phase: string): string {
  return uuidv5(`turn/${instance}/${claimId}/${role}/${phase}`, NAMESPACE);
}

/**
 * The result artefact of a turn. Every execution of the turn (a re-run after a crash included)
 * computes the same id, so the blackboard write is idempotent: at most one result artefact exists.
 */
export function resultArtefactId(claimId: string, role: string, turnId: string): string {
  return uuidv5(`result/${claimId}/${role}/${turnId}`, NAMESPACE);
}

/** A step of a turn, by its sequence number (recording a step twice is a no-op). */
export function stepIdOf(turnId: string, seq: number): string {
  return uuidv5(`step/${turnId}/${seq}`, NAMESPACE);
}

/** A living agent's one actor (src/life): its life turns, messages and waits hang off it. */
export function lifeActorOf(instance: string, role: string): string {
  return uuidv5(`life/${instance}/${role}`, NAMESPACE);
}

/** The n-th life turn of an agent (the scheduler's sequence). */
export function lifeTurnIdOf(instance: string, role: string, seq: number): string {
  return uuidv5(`life-turn/${instance}/${role}/${seq}`, NAMESPACE);
}
