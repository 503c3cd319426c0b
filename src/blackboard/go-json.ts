/**
 * JSON as Holt's Go code writes it, where the bytes are Holt's protocol: Go's encoding/json sorts the
 * keys of a map (workflow-event data, grant notifications) and escapes <, >, & and U+2028/2029 inside
 * strings (json.Marshal's HTML escaping). Structs keep their field order: callers build those objects
 * in Go's order and pass `sortKeys: false` for them.
 */

const GO_ESCAPES = /[<>&\u2028\u2029]/g;

/** Go's HTML escaping of a JSON text (those characters only ever occur inside strings). */
export function goEscape(json: string): string {
  return json.replace(GO_ESCAPES, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

/** A value with the keys of every plain object sorted, as Go writes a map[string]any. */
export function sortedKeys(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(sortedKeys);
  if (v && typeof v === 'object' && Object.getPrototypeOf(v) === Object.prototype) {
    const o = v as Record<string, unknown>;
    return Object.fromEntries(
      Object.keys(o)
        .sort()
        .map((k) => [k, sortedKeys(o[k])]),
    );
  }
  return v;
}

/** json.Marshal of a Go map[string]any (keys sorted at every level). */
export function goMapJson(v: unknown): string {
  return goEscape(JSON.stringify(sortedKeys(v)));
}
