// Ends the workflow once the plan is committed.
import { readInput, reply } from './lib.mjs';

const { target_artefact: target } = await readInput();
reply('WorkflowComplete', `plan published in commit ${target.payload}`, 'done', 'Terminal');
