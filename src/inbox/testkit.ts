// Shared set-up of the inbox tests and the benchmark: real servers, migrated schema.

import { randomUUID } from 'node:crypto';
import type { Blackboard } from '../blackboard/client.ts';
import { resultArtefactId } from '../state/ids.ts';
import type { InboxRow } from '../state/schema.ts';

export const ROLE = 'coder';

/** A claim id and artefact for a grant (the blackboard needs real UUIDs). */
export function fakeClaim(): { id: string; artefact_id: string } {
  return { id: randomUUID(), artefact_id: randomUUID() };
}

/** The result artefact a worker writes for a row: its id is the turn's deterministic id. */
export async function writeResult(bb: Blackboard, row: InboxRow, by: string): Promise<boolean> {
  const id = resultArtefactId(row.claim_id, row.role, row.turn_id);
  const r = await bb.createArtefact({
    id,
    logical_id: id,
    version: 1,
    structural_type: 'Standard',
    type: 'CodeCommit',
    payload: JSON.stringify({ claim_id: row.claim_id, by }),
    source_artefacts: [],
    produced_by_role: row.role,
  });
  return r.created;
}
