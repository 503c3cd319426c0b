/**
 * Holt's review rule (isApproval): the payload, parsed as JSON, approves only when it is an empty
 * object or an empty array. Everything else (text, invalid JSON, "", null, a JSON string) rejects.
 */
export function isApproval(payload: string): boolean {
  let v: unknown;
  try {
    v = JSON.parse(payload);
  } catch {
    return false;
  }
  if (Array.isArray(v)) return v.length === 0;
  return typeof v === 'object' && v !== null && Object.keys(v).length === 0;
}

/** review_rejected.feedback: the payload cut to 200 characters plus "..." (as Holt does). */
export function feedbackExcerpt(payload: string): string {
  return payload.length > 200 ? `${payload.slice(0, 200)}...` : payload;
}
