/**
 * Holt's database roles by name, without the Postgres client: programs that only name them (the
 * migration's --help, the operator's specs, the local secrets) load no `pg` (postgres.ts makes them).
 */
export const PG_OWNER = 'holt_owner';
export const PG_ORCHESTRATOR = 'holt_orchestrator';
export const PG_PUP = 'holt_pup';
export const PG_OPERATOR = 'holt_operator';
export const PG_LEGACY_APP = 'holt_app';

/** The components that connect to Postgres, each as its own role. */
export const PG_COMPONENTS = ['orchestrator', 'pup', 'operator'] as const;
export type PgComponent = (typeof PG_COMPONENTS)[number];
export const PG_ROLE: Record<PgComponent, string> = {
  orchestrator: PG_ORCHESTRATOR,
  pup: PG_PUP,
  operator: PG_OPERATOR,
};
export type PgPasswords = { owner: string } & Record<PgComponent, string>;
/** The variable of a component role's password for `holt migrate` (HOLT_DATABASE_PUP_PASSWORD, ...). */
export const pgPasswordEnv = (c: PgComponent) => `HOLT_DATABASE_${c.toUpperCase()}_PASSWORD`;
