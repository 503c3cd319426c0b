/**
 * The one home for turning a thrown value into words. Anything may be thrown (an Error, a string, a
 * rejected value of any shape): its message if it is an Error, else its string form.
 */
export function errorMessage(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

/**
 * The fence was lost: another process owns the turn (or the row) now, so this one must write nothing
 * more. Thrown by a fenced write that finds its epoch moved on; caught once, where the turn runs.
 */
export class FenceLostError extends Error {
  constructor(what = 'fence lost') {
    super(what);
    this.name = 'FenceLostError';
  }
}

/**
 * Whether an error says a server is not reachable yet (refused, unresolved, timed out, reset, or a
 * Postgres still starting): worth another try at start, when a store or the pod's network may come
 * up a moment later. Anything else (a refused login, a bad URL) is not.
 */
export function isUnreachable(e: unknown): boolean {
  const code = String((e as { code?: unknown } | undefined)?.code ?? '');
  return (
    ['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'ETIMEDOUT', 'ECONNRESET', 'EHOSTUNREACH', '57P03'].includes(
      code,
    ) ||
    /ECONNREFUSED|EAI_AGAIN|EHOSTUNREACH|connection refused|timeout|terminated unexpectedly|the database system is starting up/i.test(
      errorMessage(e),
    )
  );
}
