/**
 * Every failure of an agent in one of a few classes (docs/runtime-model.md § Budgets and error classes), each with its policy, so a pup whose
 * configuration is wrong is not retried like one that met a passing outage:
 * - `config`: the request cannot succeed as configured (unknown model, bad endpoint, bad parameters, a
 *   missing workspace). The agent pauses at once and says why.
 * - `auth`: the credential is refused (401, 403). The agent pauses at once and says why.
 * - `quota`: a quota or budget is spent (the provider's 402 or insufficient_quota, or our own budgets).
 *   The agent pauses (until the budget window allows, or the error pause).
 * - `transient`: a passing outage (network, timeout, 408/409/425, rate limits, 5xx, a malformed reply).
 *   Retried with backoff; only many in a row pause the agent.
 * - `model_output`: the model's output is unusable (bad arguments, an unknown tool, a result without its
 *   fields, a context too long). Shown to the model a bounded number of times, then the turn fails.
 * - `tool`: a tool failed (non-zero exit, timeout, an output that breaks the contract).
 * The class is in Failure artefacts (`error_class`), the agent's status, events and metrics.
 */
export const ERROR_CLASSES = ['config', 'auth', 'quota', 'transient', 'model_output', 'tool'] as const;
export type ErrorClass = (typeof ERROR_CLASSES)[number];
