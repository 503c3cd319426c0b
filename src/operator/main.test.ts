import { afterEach, describe, expect, it, vi } from 'vitest';
import { EXIT_CONFIG } from '../common/config.ts';
import { main } from './main.ts';

describe('holt operator', () => {
  afterEach(() => vi.restoreAllMocks());

  it('answers a bad setting with one line naming it and the configuration exit code, before touching a cluster', async () => {
    const lines: string[] = [];
    vi.spyOn(process.stderr, 'write').mockImplementation((chunk: string | Uint8Array) => {
      lines.push(String(chunk));
      return true;
    });
    const code = await main([], { HOLT_OPERATOR_STATUS_POLL_MS: '5', KUBECONFIG: '/nonexistent' });
    expect(code).toBe(EXIT_CONFIG);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(/^holt operator: invalid configuration: statusPollMs: .*500/);
  });
});
