import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import { MAX_PRIORITY, MODES, type Mode, TokenEntry } from '../../access/tokens.ts';
import { loadHoltFile } from '../../api/holtfile.ts';
import { Callback } from '../../common/callback.ts';
import { deliverySecretOf } from '../../ingress/signature.ts';
import { createToken, readTokenFile, revokeToken } from '../../ingress/tokens.ts';
import { TOKEN_ORIGINS } from '../../life/labels.ts';
import { ingressTokensFile } from '../../local/instance.ts';
import { instanceSecrets, toolServiceUser } from '../../local/secrets.ts';
import type { KubeRefHolt } from '../kube.ts';
import { age, CliError, EXIT, out, table } from '../output.ts';
import { resolveInstance } from '../resolve.ts';
import { type Queued, queueKube, queueLocal } from '../send.ts';

/** `--mode a,b` → the modes, checked. */
function modesOf(v: string | undefined): Mode[] {
  const r = z
    .array(z.enum(MODES))
    .min(1)
    .safeParse((v ?? MODES.join(',')).split(',').map((s) => s.trim()));
  if (!r.success) throw new CliError(`--mode takes ${MODES.join(' and/or ')} (comma-separated)`, EXIT.usage);
  return r.data;
}

/** `holt token create ROLE`: a capability token for one agent's ingress, shown once. */
export async function tokenCreate(
  role: string,
  tokenName: string | undefined,
  o: {
    name?: string;
    mode?: string;
    origin?: string;
    rate?: string;
    maxPriority?: string;
    callback?: string[];
  },
): Promise<void> {
  const s = resolveInstance(o.name, { mustRun: false });
  livingAgent(s.holtFile, role);
  const origin = z.enum(TOKEN_ORIGINS).safeParse(o.origin ?? 'webhook');
  if (!origin.success) throw new CliError(`--origin takes ${TOKEN_ORIGINS.join(', ')}`, EXIT.usage);
  const rate = z.coerce
    .number()
    .int()
    .min(1)
    .max(100_000)
    .safeParse(o.rate ?? '60');
  if (!rate.success) throw new CliError('--rate is requests a minute, 1 to 100000', EXIT.usage);
  const maxPriority = z.coerce
    .number()
    .int()
    .min(0)
    .max(MAX_PRIORITY)
    .safeParse(o.maxPriority ?? '0');
  if (!maxPriority.success) throw new CliError(`--max-priority is 0 to ${MAX_PRIORITY}`, EXIT.usage);
  const callbacks = (o.callback ?? []).map((c) => {
    const at = c.indexOf('=');
    const cb = Callback.safeParse({ name: c.slice(0, Math.max(0, at)), url: c.slice(at + 1) });
    if (at < 1 || !cb.success)
      throw new CliError(
        `--callback ${JSON.stringify(c)}: give name=url, a DNS-label name and an http(s) URL without credentials or nats:<tool> (a tool service)${cb.success ? '' : ` (${cb.error.issues[0]?.message})`}`,
        EXIT.usage,
      );
    return cb.data;
  });
  const name = TokenEntry.shape.name.safeParse(tokenName ?? `${origin.data}-${randomUUID().slice(0, 8)}`);
  if (!name.success) throw new CliError(`token name: ${name.error.issues[0]?.message}`, EXIT.usage);
  let made: ReturnType<typeof createToken>;
  try {
    made = createToken(ingressTokensFile(s.name), {
      name: name.data,
      role,
      modes: modesOf(o.mode),
      origin: origin.data,
      ratePerMinute: rate.data,
      maxPriority: maxPriority.data,
      callbacks,
    });
  } catch (e) {
    throw new CliError((e as Error).message, EXIT.usage);
  }
  out(made.token);
  process.stderr.write(
    `token ${made.entry.name} for agent ${role} (${made.entry.modes.join(', ')}; origin ${made.entry.origin}; ${made.entry.ratePerMinute}/min${made.entry.maxPriority ? `; priority up to ${made.entry.maxPriority}` : ''}${callbacks.length ? `; callbacks ${callbacks.map((c) => c.name).join(', ')}` : ''}). It is shown once: only its hash is kept.\n` +
      (callbacks.length
        ? `  deliveries to its callbacks are signed (Standard Webhooks) with the secret ${deliverySecretOf(made.token)}\n`
        : '') +
      (s.ingressUrl
        ? `  curl -X POST ${s.ingressUrl}/v1/agents/${encodeURIComponent(role)}/messages -H "Authorization: Bearer $TOKEN" -H "Idempotency-Key: $(uuidgen)" -d '{"text":"hello"}'\n`
        : `  (instance '${s.name}' has no living agent, so no ingress yet: give an agent llm.life: true)\n`),
  );
}

/**
 * Refuses a token for an agent the instance's Holt file does not have, or that does not live (its
 * messages would wait unread). A file that cannot be read now is not held against the token.
 */
function livingAgent(holtFile: string, role: string): void {
  let agents: { role: string; llm?: { life?: boolean } }[];
  try {
    agents = loadHoltFile(holtFile).agents;
  } catch {
    return;
  }
  const a = agents.find((x) => x.role === role);
  if (!a)
    throw new CliError(
      `${holtFile} has no agent ${role} (agents: ${agents.map((x) => x.role).join(', ')})`,
      EXIT.notFound,
    );
  if (!a.llm?.life)
    throw new CliError(
      `agent ${role} does not live, so its messages would wait unread: give it llm.life: true in ${holtFile}`,
      EXIT.usage,
    );
}

/** `holt token list [ROLE]`. */
export async function tokenList(
  role: string | undefined,
  o: { name?: string; json?: boolean },
): Promise<void> {
  const s = resolveInstance(o.name, { mustRun: false });
  const tokens = readTokenFile(ingressTokensFile(s.name)).tokens.filter((t) => !role || t.role === role);
  if (o.json)
    return out(
      JSON.stringify(
        tokens.map(({ sha256: _, ...t }) => t),
        null,
        2,
      ),
    );
  if (!tokens.length)
    return out(role ? `No tokens for ${role}.` : 'No tokens: `holt token create ROLE` makes one.');
  for (const l of table([
    ['NAME', 'AGENT', 'MODES', 'ORIGIN', 'RATE/MIN', 'MAX PRIORITY', 'CREATED'],
    ...tokens.map((t) => [
      t.name,
      t.role,
      t.modes.join(','),
      t.origin,
      String(t.ratePerMinute),
      String(t.maxPriority),
      age(t.createdAtMs),
    ]),
  ]))
    out(l);
}

/** `holt token revoke ROLE NAME`: refused from the next request on. */
export async function tokenRevoke(role: string, name: string, o: { name?: string }): Promise<void> {
  const s = resolveInstance(o.name, { mustRun: false });
  if (!revokeToken(ingressTokensFile(s.name), role, name))
    throw new CliError(`agent ${role} has no token named ${name}: see \`holt token list\``, EXIT.notFound);
  out(`revoked ${name} (${role})`);
}

/** What became of a message (or a wake) the ingress took. */
function said(mode: 'messages' | 'wake', role: string, r: Queued): void {
  out(
    `${r.status === 'duplicate' ? 'already queued' : 'queued'}: ${mode === 'messages' ? 'message' : 'wake'} ${r.id} for ${role}`,
  );
}

/** `holt send ROLE TEXT` / `holt wake ROLE` on a local instance, through its ingress. */
export async function sendLocal(
  mode: 'messages' | 'wake',
  role: string,
  text: string | undefined,
  o: { name?: string; token?: string; key?: string },
): Promise<void> {
  said(mode, role, await queueLocal(mode, role, text, o));
}

/** `holt --kube … send|wake ROLE`. */
export async function sendKube(
  k: KubeRefHolt,
  mode: 'messages' | 'wake',
  role: string,
  text: string | undefined,
  o: { token?: string; key?: string },
): Promise<void> {
  said(mode, role, await queueKube(k, mode, role, text, o));
}

/**
 * `holt tool-url`: the NATS URL a tool service of a local instance connects with. With `--tool <name>`:
 * the user of that one tool (it hears only cmd.tool.<instance>.<name> and may only answer); without:
 * the `tool` user, every tool of the instance. On a cluster: the key `tool-url` of the Secret `<holt>-nats`.
 */
export async function toolUrl(o: { name?: string; tool?: string }): Promise<void> {
  const s = resolveInstance(o.name);
  if (!s.natsUrl) throw new CliError(`instance '${s.name}' has no NATS`, EXIT.notFound);
  const u = new URL(s.natsUrl);
  if (o.tool !== undefined && !/^[A-Za-z0-9_-]{1,64}$/.test(o.tool))
    throw new CliError(`invalid tool name ${JSON.stringify(o.tool)}`, EXIT.usage);
  const who =
    o.tool === undefined
      ? { user: 'tool', password: instanceSecrets(s.name).nats.tool }
      : toolServiceUser(s.name, o.tool);
  u.username = who.user;
  u.password = who.password;
  out(u.toString().replace(/\/$/, ''));
}
