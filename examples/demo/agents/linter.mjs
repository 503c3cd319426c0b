// Parallel phase: counts words of the approved draft.
import { readInput, reply } from './lib.mjs';

const { target_artefact: target } = await readInput();
const words = target.payload.split(/\s+/).filter(Boolean).length;
reply('LintReport', JSON.stringify({ words, ok: words > 5 }), `${words} words`);
