// Writes a plan for the goal. Asked for a rework, it reads the review feedback from its context.
import { readInput, reply } from './lib.mjs';

const { target_artefact: target, context_chain: context } = await readInput();
const feedback = context.filter((a) => a.structural_type === 'Review').map((a) => a.payload);
if (target.type === 'GoalDefined') {
  reply('Draft', `# Plan\n\nGoal: ${target.payload}\n\n1. Write it down.\n2. Publish it.\n`, 'first draft of the plan');
} else {
  // A rework: the pup keeps the type and bumps the version; we only improve the text.
  const goal = context.find((a) => a.type === 'GoalDefined')?.payload ?? '';
  reply(
    'Draft',
    `# Plan\n\n## Summary\n\nA two-step plan for: ${goal}\n\n1. Write it down.\n2. Publish it.\n`,
    `rework addressing: ${feedback.join('; ')}`,
  );
}
