import type { ErrorClass } from '../../blackboard/error-class.ts';

/** Model failures classified, and errors that carry their class (src/blackboard/error-class.ts). */

/** What a model call's failure says about itself: its HTTP status, the provider's error code, its text. */
export interface ModelFailure {
  status?: number | undefined;
  code?: string | null | undefined;
  message: string;
}

/** The class of a model call's failure (OpenAI's error shapes; other compatible servers follow them). */
export function classifyModelFailure(f: ModelFailure): ErrorClass {
  const { status, message } = f;
  const code = f.code ?? '';
  if (code === 'context_length_exceeded' || /maximum context length|context.length/i.test(message))
    return 'model_output';
  if (status === undefined) return 'transient'; // network, timeout, a reply that did not parse
  if (status === 401 || status === 403) return 'auth';
  if (status === 402 || code === 'insufficient_quota' || (status === 429 && /quota|billing/i.test(message)))
    return 'quota';
  if (status === 408 || status === 409 || status === 425 || status === 429 || status >= 500)
    return 'transient';
  return 'config'; // 400, 404, 405, 413, 422...: the request as configured cannot succeed
}

/** Whether another attempt at the same call can help. */
export const isRetryableClass = (c: ErrorClass) => c === 'transient';

/** Whether the class pauses the agent at once (nothing the agent does next can succeed until someone acts). */
export const pausesAtOnce = (c: ErrorClass) => c === 'config' || c === 'auth' || c === 'quota';

/** An error that knows its class (a model call's, a pause's, a turn's). */
export class ClassifiedError extends Error {
  readonly errorClass: ErrorClass;
  constructor(message: string, errorClass: ErrorClass) {
    super(message);
    this.name = 'ClassifiedError';
    this.errorClass = errorClass;
  }
}

/** The class an error carries, or `fallback` when it carries none. */
export function classOf(e: unknown, fallback: ErrorClass = 'transient'): ErrorClass {
  return e instanceof ClassifiedError ? e.errorClass : fallback;
}
