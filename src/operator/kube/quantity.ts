/** Kubernetes quantities, compared exactly. */

const DECIMAL: Record<string, number> = { '': 0, m: -3, k: 3, M: 6, G: 9, T: 12, P: 15, E: 18 };
const BINARY: Record<string, number> = { Ki: 10, Mi: 20, Gi: 30, Ti: 40, Pi: 50, Ei: 60 };

/**
 * A Kubernetes quantity (1Gi, 500M, 1.5e9, 751619276800m) as an exact fraction: the API server
 * stores quantities in canonical form (0.7Gi comes back as 751619276800m), which floating point
 * would compare wrongly. Throws on anything that is not a quantity.
 */
export function quantityValue(q: string): { num: bigint; den: bigint } {
  const m = /^([+-]?)(\d*)(?:\.(\d*))?(?:[eE]([+-]?\d+)|(Ki|Mi|Gi|Ti|Pi|Ei|[mkMGTPE]))?$/.exec(q.trim());
  if (!m || (!m[2] && !m[3])) throw new Error(`not a quantity: ${JSON.stringify(q)}`);
  const frac = m[3] ?? '';
  let num = BigInt(`${m[2] || '0'}${frac}`) * (m[1] === '-' ? -1n : 1n);
  let den = 10n ** BigInt(frac.length);
  const exp = m[4] !== undefined ? Number(m[4]) : (DECIMAL[m[5] ?? ''] ?? 0);
  if (exp >= 0) num *= 10n ** BigInt(exp);
  else den *= 10n ** BigInt(-exp);
  num *= 2n ** BigInt(BINARY[m[5] ?? ''] ?? 0);
  return { num, den };
}

/** -1, 0 or 1 as quantity `a` is below, equal to or above `b` (throws on a malformed quantity). */
export function compareQuantity(a: string, b: string): number {
  const x = quantityValue(a);
  const y = quantityValue(b);
  const l = x.num * y.den;
  const r = y.num * x.den;
  return l < r ? -1 : l > r ? 1 : 0;
}
