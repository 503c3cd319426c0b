import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { makeTempDir, removeDir } from '../../test/harness/tmp.ts';
import { notApplicable } from './not-applicable.ts';

describe('a cluster test that cannot apply says why', () => {
  const saved = process.env.HOLT_E2E_SUMMARY;
  afterEach(() => {
    if (saved === undefined) delete process.env.HOLT_E2E_SUMMARY;
    else process.env.HOLT_E2E_SUMMARY = saved;
  });

  it('skips with the reason as its note and writes it to the run summary', () => {
    const dir = makeTempDir('e2e-summary');
    try {
      const file = join(dir, 'summary.txt');
      process.env.HOLT_E2E_SUMMARY = file;
      const notes: (string | undefined)[] = [];
      const ctx = {
        task: { name: 'two nodes: a node stops' },
        skip: (note?: string): never => {
          notes.push(note);
          throw new Error('skipped');
        },
      };
      expect(() => notApplicable(ctx, 'the cluster has one node')).toThrow('skipped');
      expect(notes).toEqual(['the cluster has one node']);
      expect(readFileSync(file, 'utf8')).toBe(
        'NOT APPLICABLE: two nodes: a node stops: the cluster has one node\n',
      );
    } finally {
      removeDir(dir);
    }
  });
});
