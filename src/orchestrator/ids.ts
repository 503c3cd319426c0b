import { v5 } from 'uuid';

// Fixed namespace for ids derived from a claim, so a step replayed after a crash writes the same
// feedback claim or Failure artefact again (write-once) instead of a second one.
const NAMESPACE = '6f1c3c1e-2a77-4c55-9a57-0f3b9d4f6a10';

export function derivedId(claimId: string, what: string): string {
  return v5(`${claimId}/${what}`, NAMESPACE);
}
