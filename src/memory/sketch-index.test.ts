import { describe, expect, it } from 'vitest';
import { seeded } from '../common/seeded.ts';
import { SKETCH_BITS } from './rank.ts';
import { SketchIndex, type SketchRow } from './sketch-index.ts';

const r = seeded(7);
const bits = () => Array.from({ length: SKETCH_BITS }, () => (r() < 0.5 ? '1' : '0')).join('');
const hamming = (a: string, b: string) => [...a].filter((c, i) => c !== b[i]).length;

describe('the sketch index (the coarse scan of the vector ranking)', () => {
  const rows: SketchRow[] = Array.from({ length: 3000 }, (_, i) => ({
    id: String(i + 1),
    scope: i % 5 === 0 ? 'holt' : 'agent',
    role: i % 2 ? 'Ops' : 'Dev',
    kind: i % 3 ? 'note' : 'action',
    sketch: bits(),
  }));
  const index = new SketchIndex();
  index.append(rows.slice(0, 2000));
  index.append(rows.slice(1500)); // overlapping: nothing is in twice
  const q = bits();

  it('names the nearest by Hamming distance, as a brute force over what the role may see', () => {
    expect(index.size).toBe(3000);
    const visible = rows.filter((x) => x.scope === 'holt' || x.role === 'Ops');
    const brute = visible
      .map((x) => ({ id: x.id, d: hamming(x.sketch, q) }))
      .sort((a, b) => a.d - b.d || Number(b.id) - Number(a.id))
      .slice(0, 25)
      .map((x) => x.id);
    expect(index.nearest(q, 25, { role: 'Ops' })).toEqual(brute);
  });

  it('keeps to a scope, a role and kinds when asked', () => {
    const own = index.nearest(q, 50, { role: 'Dev', scope: 'agent', kinds: ['action'] });
    expect(own).toHaveLength(50);
    for (const id of own)
      expect(rows[Number(id) - 1]).toMatchObject({ scope: 'agent', role: 'Dev', kind: 'action' });
    expect(index.nearest(q, 5, { role: 'Nobody', scope: 'agent' })).toEqual([]);
    expect(index.nearest(q, 10_000, { role: 'Nobody' })).toHaveLength(
      rows.filter((x) => x.scope === 'holt').length,
    );
  });
});
