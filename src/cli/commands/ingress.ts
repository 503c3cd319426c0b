import { randomUUID } from 'node:crypto';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { z } from 'zod';
import { MODES, type Mode, TokenEntry } from '../../access/tokens.ts';
import { loadHoltFile } from '../../api/holtfile.ts';
import { createToken, readTokenFile, revokeToken } from '../../ingress/tokens.ts';
import { TOKEN_ORIGINS } from '../../life/labels.ts';
import { ingressTokensFile, instanceDir } from '../../local/instance.ts';
import { instanceSecrets, toolServiceUser } from '../../local/secrets.ts';
import { age, CliError, EXIT, out, table } from '../output.ts';
import { resolveInstance } from '../resolve.ts';

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
  o: { name?: string; mode?: string; origin?: string; rate?: string },
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
    });
  } catch (e) {
    throw new CliError((e as Error).message, EXIT.usage);
  }
  out(made.token);
  process.stderr.write(
    `token ${made.entry.name} for agent ${role} (${made.entry.modes.join(', ')}; origin ${made.entry.origin}; ${made.entry.ratePerMinute}/min). It is shown once: only its hash is kept.\n` +
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
    ['NAME', 'AGENT', 'MODES', 'ORIGIN', 'RATE/MIN', 'CREATED'],
    ...tokens.map((t) => [
      t.name,
      t.role,
      t.modes.join(','),
      t.origin,
      String(t.ratePerMinute),
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

/**
 * The CLI's own operator token for a role on a local instance, made on first use and kept (0600) in the
 * instance's directory beside the admin URLs it already keeps there.
 */
function cliToken(instance: string, role: string): string {
  const file = join(instanceDir(instance), 'cli-tokens.json');
  const kept = existsSync(file)
    ? z
        .record(z.string(), z.string())
        .catch({})
        .parse(JSON.parse(readFileSync(file, 'utf8')))
    : {};
  const have = kept[role];
  const listed = readTokenFile(ingressTokensFile(instance)).tokens.some(
    (t) => t.role === role && t.name === 'cli-operator',
  );
  if (have && listed) return have;
  if (listed) revokeToken(ingressTokensFile(instance), role, 'cli-operator');
  const { token } = createToken(ingressTokensFile(instance), {
    name: 'cli-operator',
    role,
    modes: [...MODES],
    origin: 'operator',
    ratePerMinute: 600,
  });
  writeFileSync(file, `${JSON.stringify({ ...kept, [role]: token }, null, 2)}\n`, { mode: 0o600 });
  return token;
}

const Reply = z.object({
  status: z.string().optional(),
  id: z.string().optional(),
  error: z.string().optional(),
});

/** POSTs to the ingress as any client would; the reply's error becomes the CLI's. */
export async function postIngress(
  url: string,
  role: string,
  mode: 'messages' | 'wake',
  token: string,
  body: unknown,
  key: string,
): Promise<{ status: string; id: string }> {
  let r: Response;
  try {
    r = await fetch(`${url}/v1/agents/${encodeURIComponent(role)}/${mode}`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${token}`,
        'idempotency-key': key,
        'content-type': 'application/json',
      },
      body: JSON.stringify(body),
      signal: AbortSignal.timeout(15_000),
    });
  } catch (e) {
    throw new CliError(`cannot reach the ingress at ${url}: ${(e as Error).message}`, EXIT.error);
  }
  const reply = Reply.safeParse(await r.json().catch(() => ({})));
  const said = reply.success ? reply.data : {};
  if (!r.ok)
    throw new CliError(
      `the ingress answered ${r.status}: ${said.error ?? r.statusText}`,
      r.status === 404 ? EXIT.notFound : EXIT.error,
    );
  return { status: said.status ?? 'queued', id: said.id ?? '' };
}

/** Sends a message (or a wake) through an ingress at `url`, and says what became of it. */
export async function sendThrough(
  url: string,
  mode: 'messages' | 'wake',
  role: string,
  text: string | undefined,
  token: string,
  key: string | undefined,
): Promise<void> {
  const r = await postIngress(
    url,
    role,
    mode,
    token,
    mode === 'messages' ? { text } : {},
    key ?? randomUUID(),
  );
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
  const s = resolveInstance(o.name);
  if (!s.ingressUrl)
    throw new CliError(
      `instance '${s.name}' has no ingress: no agent of it lives (give one llm.life: true)`,
      EXIT.notFound,
    );
  const token = o.token ?? process.env.HOLT_TOKEN ?? cliToken(s.name, role);
  await sendThrough(s.ingressUrl, mode, role, text, token, o.key);
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
