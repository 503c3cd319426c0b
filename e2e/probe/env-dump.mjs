// A bid script or health check that records the environment it was given (names and values) in the
// file named by its first argument, then answers like a bid script (its second argument, if any).
import { appendFileSync } from 'node:fs';

appendFileSync(process.argv[2], `${JSON.stringify(process.env)}\n`);
if (process.argv[3]) process.stdout.write(`${process.argv[3]}\n`);
