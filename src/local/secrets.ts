import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { z } from 'zod';
import { toolUsers } from '../access/nats.ts';
import { PG_COMPONENTS, type PgComponent } from '../access/pg-roles.ts';
import { newPassword, newPasswords, PRINCIPALS } from '../access/principals.ts';
import { instanceDir } from './instance.ts';

// A principal added by a newer version (tool) gets its password on the first `holt up` after it.
const Passwords = z.object(
  Object.fromEntries(
    PRINCIPALS.map((p) => [
      p,
      z
        .string()
        .min(16)
        .catch(() => newPassword()),
    ]),
  ) as {
    [K in (typeof PRINCIPALS)[number]]: z.ZodCatch<z.ZodString>;
  },
);

// Postgres: the schema's owner and a role per component (src/access/postgres.ts); a component role
// added by a newer version (the single `app` role split in three) gets its password the same way.
const PgPasswords = z.object({
  owner: z.string().min(16),
  ...(Object.fromEntries(
    PG_COMPONENTS.map((c) => [
      c,
      z
        .string()
        .min(16)
        .catch(() => newPassword()),
    ]),
  ) as Record<PgComponent, z.ZodCatch<z.ZodString>>),
});

export const InstanceSecrets = z.object({
  redis: Passwords,
  nats: Passwords,
  postgres: PgPasswords,
});
export type InstanceSecrets = z.infer<typeof InstanceSecrets>;

/**
 * A local instance's store passwords, one per principal and store: made on the first `holt up` and
 * kept (0600) beside its data, which the Postgres roles' passwords and the data outlive restarts with.
 */
export function instanceSecrets(name: string): InstanceSecrets {
  const file = join(instanceDir(name), 'secrets.json');
  if (existsSync(file)) {
    const raw = JSON.parse(readFileSync(file, 'utf8'));
    const r = InstanceSecrets.safeParse(raw);
    if (r.success) {
      if (JSON.stringify(r.data) !== JSON.stringify(raw))
        writeFileSync(file, `${JSON.stringify(r.data, null, 2)}\n`, { mode: 0o600 });
      return r.data;
    }
  }
  const s: InstanceSecrets = {
    redis: newPasswords(),
    nats: newPasswords(),
    postgres: PgPasswords.parse({ owner: newPassword() }),
  };
  writeFileSync(file, `${JSON.stringify(s, null, 2)}\n`, { mode: 0o600 });
  return s;
}

/** The NATS user and password of one tool's service of a local instance (`holt tool-url --tool`). */
export function toolServiceUser(name: string, tool: string): { user: string; password: string } {
  const [u] = toolUsers(instanceSecrets(name).nats.tool, [tool]);
  return { user: u!.user, password: u!.password };
}
