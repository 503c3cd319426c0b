import { describe, expect, it } from 'vitest';
import { noStatusHint } from './unwatched.ts';

// Issue 29: a Holt in a namespace the operator does not watch sat there with no status and nothing
// that said why; `holt --kube NS/NAME status` now says it.
describe('noStatusHint (pure)', () => {
  const op = (watches: string[]) => ({ namespace: 'holt-system', name: 'holt-holt-operator', watches });

  it('an operator that watches other namespaces: says which, and how to add this one', () => {
    const h = noStatusHint('team-a', 'demo', [op(['holt-system', 'dbg2'])]);
    expect(h).toContain('Holt team-a/demo has no status yet');
    expect(h).toContain('namespace team-a is not watched');
    expect(h).toContain('holt-system/holt-holt-operator watches holt-system, dbg2');
    expect(h).toContain('watchNamespaces={...,team-a}');
  });

  it('no operator at all, or one that cannot be looked up: says so, or asks', () => {
    expect(noStatusHint('a', 'b', [])).toContain('no Holt operator runs in this cluster');
    expect(noStatusHint('a', 'b', undefined)).toContain('Is an operator watching namespace a?');
  });

  it('an operator that does watch it (or all namespaces): points at its log instead', () => {
    expect(noStatusHint('a', 'b', [op(['a'])])).toContain(
      'kubectl logs -n holt-system deploy/holt-holt-operator',
    );
    expect(noStatusHint('a', 'b', [op([])])).toContain('watches namespace a');
  });
});
