import { createHash, createHmac } from 'node:crypto';

/**
 * How a delivery to a callback is signed (pure): the Standard Webhooks scheme
 * (https://www.standardwebhooks.com), so a receiver verifies it with any of its libraries.
 * - `webhook-id`: the delivery's id, the same on every retry (it is also the `Idempotency-Key`);
 * - `webhook-timestamp`: seconds since the epoch, of this attempt;
 * - `webhook-signature`: `v1,<base64 HMAC-SHA256 of "<id>.<timestamp>.<body>">`.
 * The key is the SHA-256 of the token the message came with: its sender holds the token, so it can
 * derive the key (`whsec_` + base64 of that digest), and the Holt keeps only that hash, as it does
 * for every token. Whoever can read the token file could sign; they could read the tokens' Secrets too.
 */

/** The HMAC key of a token's deliveries, from the hash the Holt keeps (hex SHA-256 of the token). */
export const deliveryKey = (tokenSha256Hex: string): Buffer => Buffer.from(tokenSha256Hex, 'hex');

/** The key as a Standard Webhooks secret, from the token itself (what its holder computes). */
export const deliverySecretOf = (token: string): string =>
  `whsec_${createHash('sha256').update(token, 'utf8').digest('base64')}`;

/** The headers of one attempt of a delivery of `body`. */
export function signedHeaders(key: Buffer, id: string, body: string, nowMs: number): Record<string, string> {
  const ts = Math.floor(nowMs / 1000);
  const mac = createHmac('sha256', key).update(`${id}.${ts}.${body}`).digest('base64');
  return {
    'webhook-id': id,
    'webhook-timestamp': String(ts),
    'webhook-signature': `v1,${mac}`,
    'idempotency-key': id,
  };
}
