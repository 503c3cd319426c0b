import { Option } from 'commander';
import { describe, expect, it } from 'vitest';
import { OPERATOR_PROGRAM } from '../operator/program.ts';
import { EnvSchema } from '../orchestrator/config.ts';
import { OrchestratorInboxEnv } from '../orchestrator/inbox.ts';
import { ORCHESTRATOR_PROGRAM, ORCHESTRATOR_SECRETS } from '../orchestrator/program.ts';
import { PupEnvVars } from '../pup/config.ts';
import { PUP_PROGRAM, PUP_SECRETS } from '../pup/program.ts';
import { MIGRATE_SECRETS } from '../state/migrate-program.ts';
import { TracingEnv } from '../telemetry/settings.ts';
import { type ProgramSpec, parseProgram } from './program.ts';
import { VERSION } from './version.ts';

const spec: ProgramSpec = {
  name: 'holt thing',
  description: 'Does a thing.',
  settings: [
    { env: 'HOLT_BID_TIMEOUT_MS', help: 'bid timeout' },
    { env: 'HOLT_X_ELECT', flag: 'elect', optionalValue: true, help: 'a switch' },
  ],
  options: [new Option('--execute-claim <id>', 'one claim')],
  epilog: 'Environment only: REDIS_URL.',
};

function parse(argv: string[], env: NodeJS.ProcessEnv = {}, s = spec) {
  let out = '';
  let err = '';
  const r = parseProgram(s, argv, env, {
    out: (x) => {
      out += x;
    },
    err: (x) => {
      err += x;
    },
  });
  return { r, out, err };
}

describe('parseProgram: the runtime programs’ command line', () => {
  it('--help prints usage, every setting with its variable and the epilog, and stops with 0', () => {
    const { r, out } = parse(['--help']);
    expect(r).toEqual({ run: false, exitCode: 0 });
    expect(out).toContain('Usage: holt thing [options]');
    expect(out).toContain('--bid-timeout-ms <value>');
    expect(out).toContain('env: HOLT_BID_TIMEOUT_MS');
    expect(out).toContain('Environment only: REDIS_URL.');
  });

  it('--version prints the package version and stops with 0', () => {
    const { r, out } = parse(['--version']);
    expect(r).toEqual({ run: false, exitCode: 0 });
    expect(out.trim()).toBe(VERSION);
    expect(VERSION).toMatch(/^\d+\.\d+\.\d+/);
  });

  it('an unknown flag or a stray argument is a usage error (2) that says so', () => {
    const a = parse(['--bogus', '1']);
    expect(a.r).toEqual({ run: false, exitCode: 2 });
    expect(a.err).toContain("unknown option '--bogus'");
    expect(parse(['stray']).r).toEqual({ run: false, exitCode: 2 });
  });

  it('a flag wins over its variable; the variable is the fallback; a bare switch is true', () => {
    const env = { HOLT_BID_TIMEOUT_MS: '5', OTHER: 'kept' };
    const flagged = parse(['--bid-timeout-ms=7', '--elect'], env).r;
    expect(flagged.run && flagged.env).toMatchObject({
      HOLT_BID_TIMEOUT_MS: '7',
      HOLT_X_ELECT: 'true',
      OTHER: 'kept',
    });
    const plain = parse([], env).r;
    expect(plain.run && plain.env.HOLT_BID_TIMEOUT_MS).toBe('5');
    const off = parse(['--elect=false']).r;
    expect(off.run && off.env.HOLT_X_ELECT).toBe('false');
    const claim = parse(['--execute-claim', 'abc']).r;
    expect(claim.run && claim.opts.executeClaim).toBe('abc');
  });

  it("the pup ignores Holt's agent command after it, flags included", () => {
    const r = parse(['--execute-claim', 'abc', '/app/run.sh', '--verbose'], {}, PUP_PROGRAM).r;
    expect(r.run && r.opts.executeClaim).toBe('abc');
    expect(parse(['--bogus'], {}, PUP_PROGRAM).r).toEqual({ run: false, exitCode: 2 });
  });

  it("every variable a program's schema reads is a setting of its --help, or listed as environment only", () => {
    const covered = (p: ProgramSpec, secrets: string[]) =>
      new Set([...p.settings.map((s) => s.env), ...secrets]);
    const orch = covered(ORCHESTRATOR_PROGRAM, ORCHESTRATOR_SECRETS);
    for (const k of [...Object.keys(EnvSchema.shape), ...Object.keys(OrchestratorInboxEnv.shape)])
      expect(orch.has(k), `orchestrator: ${k}`).toBe(true);
    const pup = covered(PUP_PROGRAM, PUP_SECRETS);
    for (const k of [...Object.keys(PupEnvVars.shape), ...Object.keys(TracingEnv.shape)])
      expect(pup.has(k), `pup: ${k}`).toBe(true);
    for (const p of [ORCHESTRATOR_PROGRAM, PUP_PROGRAM, OPERATOR_PROGRAM])
      for (const s of p.settings) expect(s.help.length, `${p.name}: ${s.env} has help`).toBeGreaterThan(5);
    expect(MIGRATE_SECRETS).toContain('DATABASE_URL');
  });
});
