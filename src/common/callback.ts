import { z } from 'zod';

/**
 * A callback an ingress token registers (its token file entry, an Agent's spec.ingress.tokens): a
 * DNS-label name a message names to have its outcome delivered, and the http(s) URL it goes to. The URL
 * is the token's maker's, never a caller's; credentials in it are refused (they would reach logs).
 */
export const Callback = z.object({
  name: z
    .string()
    .regex(/^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/, 'a callback name is a DNS label')
    .describe('What a message names in "reply_to" (a DNS label).'),
  url: z
    .url({ protocol: /^https?$/ })
    .max(2000)
    .refine((u) => {
      const p = new URL(u);
      return !p.username && !p.password;
    }, 'no credentials in a callback URL')
    .describe('Where the outcome is POSTed: an http(s) URL without credentials in it.'),
});
export type Callback = z.infer<typeof Callback>;
