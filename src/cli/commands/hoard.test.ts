import { describe, expect, it } from 'vitest';
import { artefact } from '../../blackboard/testkit.ts';
import { traceLines } from './hoard.ts';

describe('holt hoard: the traces of the listed workflows', () => {
  const tp = (trace: string) => `00-${trace}-00f067aa0ba902b7-01`;
  const one = '4bf92f3577b34da6a3ce929d0e0e4736';
  const two = '0af7651916cd43dd8448eb211c80319c';

  it('names each trace once, with how many artefacts it holds and the first of them', () => {
    const goal = artefact({ traceparent: tp(one) });
    const list = [
      goal,
      artefact({ type: 'Draft', produced_by_role: 'Drafter', traceparent: tp(one) }),
      artefact({ traceparent: tp(two) }),
      artefact({ type: 'Note' }), // written before traces were carried: no line of its own
    ];
    const lines = traceLines(list);
    expect(lines[0]).toMatch(/^Traces/);
    expect(lines).toHaveLength(3);
    expect(lines[1]).toMatch(new RegExp(`^  ${one}\\s+2 artefacts from ${goal.id.slice(0, 8)} \\(Goal\\)$`));
    expect(lines[2]).toMatch(new RegExp(`^  ${two}\\s+1 artefact from `));
  });

  it('prints nothing when no artefact carries a valid trace', () => {
    expect(traceLines([artefact(), artefact({ traceparent: '00-not-a-trace' })])).toEqual([]);
  });
});
