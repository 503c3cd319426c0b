/** Exit code of a process that died of a bug (an unhandled rejection or exception): EX_SOFTWARE. */
export const EXIT_FATAL = 70;

/**
 * A promise nobody awaited that rejects, or an exception nobody caught, leaves the process in an
 * unknown state: log one JSON line (what a log collector reads) and exit non-zero so the supervisor
 * (the kubelet, `holt up`) restarts it, instead of limping on or dying without a word.
 */
export function installFatalHandlers(program: string): void {
  const die = (event: string) => (e: unknown) => {
    const error = e instanceof Error ? e : new Error(String(e));
    process.stderr.write(
      `${JSON.stringify({
        level: 'fatal',
        timestamp: new Date().toISOString(),
        component: program,
        event_type: event,
        error: error.message,
        stack: error.stack?.split('\n').slice(0, 8).join('\n'),
      })}\n`,
    );
    process.exit(EXIT_FATAL);
  };
  process.on('unhandledRejection', die('unhandled_rejection'));
  process.on('uncaughtException', die('uncaught_exception'));
}
