import { defineConfig } from 'vitest/config';
import { BaseSequencer, type TestSpecification } from 'vitest/node';

/**
 * The real-cluster e2e is the longest file by far (about 14 minutes): it starts first, so the other
 * files run beside it instead of before it. Vitest's own order (by past durations, else by file size)
 * would put it late in a fresh clone, where no durations are cached and the file itself is short.
 */
class LongestFirst extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const sorted = await super.sort(files);
    const first = (f: TestSpecification) => f.moduleId.endsWith('/e2e/cluster.test.ts');
    return [...sorted.filter(first), ...sorted.filter((f) => !first(f))];
  }
}

// Each test file gets its own servers (started by test/harness), so files run in separate
// processes; two at a time keeps a 2-core machine responsive.
export default defineConfig({
  test: {
    include: ['src/**/*.test.ts', 'test/**/*.test.ts', 'e2e/**/*.test.ts'],
    pool: 'forks',
    maxWorkers: 2,
    // Only a guard against a hang, never a speed check: a test that runs `holt up` can take a minute on a
    // 2-core machine that also runs the real cluster's e2e (load average above 30 in CI).
    testTimeout: 180_000,
    hookTimeout: 120_000,
    globalSetup: ['test/harness/global-setup.ts'],
    sequence: { sequencer: LongestFirst },
    // The digest comes last: CI shows the tail of the output, and the digest names each failure there.
    reporters: ['default', './test/harness/failure-digest.ts'],
  },
});
