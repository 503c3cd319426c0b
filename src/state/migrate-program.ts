import { PG_COMPONENTS, pgPasswordEnv } from '../access/pg-roles.ts';
import { type ProgramSpec, secretsEpilog } from '../common/program.ts';

export const MIGRATE_SECRETS = [
  'DATABASE_URL',
  'HOLT_DATABASE_ADMIN_URL',
  'HOLT_DATABASE_OWNER_PASSWORD',
  ...PG_COMPONENTS.map(pgPasswordEnv),
];

export const MIGRATE_PROGRAM: ProgramSpec = {
  name: 'holt migrate',
  description:
    "Apply the inbox schema's pending migrations to DATABASE_URL and exit (the operator's migration Job). With the bundled store's admin URL and role passwords, the owner's and each component's roles are made first.",
  settings: [
    {
      env: 'HOLT_MIGRATE_WAIT_SECONDS',
      flag: 'wait-seconds',
      help: 'how long to retry while Postgres is unreachable [60]',
    },
    {
      env: 'HOLT_DATABASE_ROLES',
      flag: 'roles',
      help: "component roles that must exist before migrating (comma-separated; an external database's own, such as holt_pup) []",
    },
  ],
  epilog: `${secretsEpilog(MIGRATE_SECRETS)}\nExit codes: 0 done (or --help/--version), 1 failed or bad configuration, 2 bad usage.`,
};
