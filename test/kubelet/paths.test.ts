import { describe, expect, it } from 'vitest';
import { rewritePaths } from './paths.ts';

describe('rewritePaths', () => {
  const map = new Map([
    ['/workspace', '/tmp/k/pvc-ws'],
    ['/workspace/cache/', '/tmp/k/cache'],
    ['/opt/holt', '/tmp/k/runtime'],
    ['/tmp', '/tmp/k/pod/tmp'],
  ]);

  it('rewrites whole path prefixes in env values, args and JSON', () => {
    expect(rewritePaths('/workspace', map)).toBe('/tmp/k/pvc-ws');
    expect(rewritePaths('/opt/holt/bin/holt', map)).toBe('/tmp/k/runtime/bin/holt');
    expect(rewritePaths('["node","/workspace/a.mjs","x=/tmp/y"]', map)).toBe(
      '["node","/tmp/k/pvc-ws/a.mjs","x=/tmp/k/pod/tmp/y"]',
    );
    expect(rewritePaths('--dir=/workspace:/opt/holt', map)).toBe('--dir=/tmp/k/pvc-ws:/tmp/k/runtime');
  });

  it('prefers the longest mount and never rewrites twice', () => {
    expect(rewritePaths('/workspace/cache/x', map)).toBe('/tmp/k/cache/x');
    // The replacement starts with /tmp, which is itself mapped: one pass leaves it alone.
    expect(rewritePaths('/workspace/a /tmp/b', map)).toBe('/tmp/k/pvc-ws/a /tmp/k/pod/tmp/b');
  });

  it('leaves look-alike paths alone', () => {
    expect(rewritePaths('/opt/holt-demo/agents/x.mjs', map)).toBe('/opt/holt-demo/agents/x.mjs');
    expect(rewritePaths('/home/workspace', map)).toBe('/home/workspace');
    expect(rewritePaths('/workspaces', map)).toBe('/workspaces');
    expect(rewritePaths('redis://127.0.0.1:6379/0', map)).toBe('redis://127.0.0.1:6379/0');
  });
});
