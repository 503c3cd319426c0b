// Bid script: bids <bid> on artefacts of <type>, ignore on everything else.
import { readInput } from './lib.mjs';

const [type, bid] = process.argv.slice(2);
const artefact = await readInput();
process.stdout.write(artefact.type === type ? bid : 'ignore');
