/**
 * The one home for turning a thrown value into words. Anything may be thrown (an Error, a string, a
 * rejected value of any shape): its message if it is an Error, else its string form.
 */
export function errorMessage(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}
