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
