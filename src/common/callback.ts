import { z } from 'zod';

/**
 * A callback an ingress token registers (its token file entry, an Agent's spec.ingress.tokens): a
 * DNS-label name a message names to have its outcome delivered, and where it goes: an http(s) URL, or a
 * tool service's NATS subject (`nats:<tool>`). It is the token's maker's, never a caller's; credentials
 * in a URL are refused (they would reach logs).
 */
/** A tool service's outcome subject: `nats:<tool>` (the service of that async: nats tool hears it). */
export const NATS_CALLBACK = /^nats:([A-Za-z0-9_-]{1,64})$/;

/** Whether a callback URL is http(s) without credentials, or a tool service's `nats:<tool>`. */
function validTarget(u: string): boolean {
  if (NATS_CALLBACK.test(u)) return true;
  let p: URL;
  try {
    p = new URL(u);
  } catch {
    return false;
  }
  return (p.protocol === 'http:' || p.protocol === 'https:') && !p.username && !p.password;
}

export const Callback = z.object({
  name: z
    .string()
    .regex(/^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/, 'a callback name is a DNS label')
    .describe('What a message names in "reply_to" (a DNS label).'),
  url: z
    .string()
    .max(2000)
    .refine(validTarget, 'an http(s) URL without credentials in it, or nats:<tool> (a tool service)')
    .describe(
      'Where the outcome goes: POSTed to an http(s) URL without credentials in it, or sent as a NATS request to the service of the async: nats tool <tool> (nats:<tool>, on cmd.tool.<instance>.<tool>.outcome).',
    ),
});
export type Callback = z.infer<typeof Callback>;

/**
 * Where a delivery goes, as shown to people (`holt life deliveries`, the console): a tool service's
 * `nats:<tool>`, or an http(s) URL's host only (its path may hold a secret of the receiver's). Pure.
 */
export function shownTarget(url: string): string {
  if (NATS_CALLBACK.test(url)) return url;
  return URL.parse(url)?.host ?? '';
}
