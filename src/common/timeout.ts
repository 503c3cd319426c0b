/** A promise that did not settle in time (see withTimeout). */
export class TimeoutError extends Error {}

/** `p`, or a TimeoutError naming `what` after `ms` ms; the timer never outlives the race. */
export function withTimeout<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const t = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new TimeoutError(`${what} timed out after ${ms} ms`)), ms);
  });
  return Promise.race([p, t]).finally(() => clearTimeout(timer));
}
