import { describe, expect, it } from 'vitest';
import { holtCommand, PUP_NODE_FLAGS } from './daemon.ts';

describe('how holt up starts its programs', () => {
  it('a pup with its small young generation, before the script; the other programs without', () => {
    const pup = holtCommand(['pup']);
    expect(pup.command).toBe(process.execPath);
    expect(pup.args.slice(0, PUP_NODE_FLAGS.length)).toEqual(PUP_NODE_FLAGS);
    expect(pup.args.at(-1)).toBe('pup');
    expect(pup.args.indexOf('--max-semi-space-size=1')).toBeLessThan(
      pup.args.findIndex((a) => a.endsWith('main.ts')),
    );
    expect(holtCommand(['orchestrator']).args).not.toContain('--max-semi-space-size=1');
  });
});
