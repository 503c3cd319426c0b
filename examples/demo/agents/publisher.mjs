// Exclusive phase: writes the approved draft into the workspace and commits it.
import { execFileSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { readInput, reply } from './lib.mjs';

const { target_artefact: target } = await readInput();
const git = (...args) => execFileSync('git', args, { encoding: 'utf8' }).trim();
mkdirSync('docs', { recursive: true });
writeFileSync('docs/plan.md', target.payload);
git('add', 'docs/plan.md');
git('-c', 'user.name=Holt Publisher', '-c', 'user.email=publisher@holt.local', 'commit', '-q', '-m', `Publish plan v${target.version}`);
reply('CodeCommit', git('rev-parse', 'HEAD'), 'published docs/plan.md');
