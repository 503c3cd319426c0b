/**
 * How a pup runs (docs/agent-worker.md § Modes): `standard` bids and executes its own grants,
 * `controller` only bids (its role's grants go to workers), `worker` only executes inbox rows. The
 * operator sets it, the pup reads it: a protocol piece both speak.
 */
export const PUP_MODES = ['standard', 'controller', 'worker'] as const;
export type PupMode = (typeof PUP_MODES)[number];
