// Approves ({}) a draft with a Summary section; otherwise rejects with a reason.
import { readInput, reply } from './lib.mjs';

const { target_artefact: target } = await readInput();
const ok = target.payload.includes('## Summary');
reply('Review', ok ? '{}' : JSON.stringify({ issue: 'the draft needs a ## Summary section' }), ok ? 'approved' : 'rejected: no summary');
