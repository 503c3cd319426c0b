import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect, it } from 'vitest';
import { holt, kubectl, NS, run, trailOf, waitHoltReady } from '../ctx.ts';
import { agentDoc, holtDoc, holtLabel, yamlDocs } from '../manifests.ts';

/** The real cluster: stores over TLS. */
export function tlsTests(): void {
  it('stores over TLS: a certificate in a Secret, every component and the CLI verify it, the plain port is shut', async () => {
    // A CA and a certificate for the three stores, made here as cert-manager would put them in a Secret.
    const dir = mkdtempSync(join(tmpdir(), 'holt-tls-'));
    const ssl = (...a: string[]) => run('openssl', a, { cwd: dir });
    const names = ['redis', 'nats', 'postgres'].flatMap((s) => [`tls-${s}`, `tls-${s}.${NS}.svc`]);
    await ssl(
      'req',
      '-x509',
      '-newkey',
      'rsa:2048',
      '-nodes',
      '-keyout',
      'ca.key',
      '-out',
      'ca.crt',
      '-subj',
      '/CN=holt-e2e-ca',
      '-days',
      '1',
    );
    await ssl(
      'req',
      '-newkey',
      'rsa:2048',
      '-nodes',
      '-keyout',
      'tls.key',
      '-out',
      'tls.csr',
      '-subj',
      '/CN=tls-stores',
    );
    writeFileSync(join(dir, 'san.ext'), `subjectAltName=${names.map((n) => `DNS:${n}`).join(',')}\n`);
    await ssl(
      'x509',
      '-req',
      '-in',
      'tls.csr',
      '-CA',
      'ca.crt',
      '-CAkey',
      'ca.key',
      '-CAcreateserial',
      '-out',
      'tls.crt',
      '-days',
      '1',
      '-extfile',
      'san.ext',
    );
    const docs = [
      {
        apiVersion: 'v1',
        kind: 'Secret',
        metadata: { name: 'tls-stores-cert', labels: holtLabel('tls') },
        type: 'kubernetes.io/tls',
        stringData: Object.fromEntries(
          ['tls.crt', 'tls.key', 'ca.crt'].map((f) => [f, readFileSync(join(dir, f), 'utf8')]),
        ),
      },
      holtDoc('tls', { stores: { tls: { secretName: 'tls-stores-cert' } } }),
      agentDoc('tls-finisher', 'tls', {
        role: 'Finisher',
        command: [
          'sh',
          '-c',
          'cat >/dev/null; echo \'{"artefact_type":"Done","artefact_payload":"over tls","summary":"ok","structural_type":"Terminal"}\'',
        ],
        bidding: { strategy: 'exclusive' },
      }),
    ];
    rmSync(dir, { recursive: true, force: true });
    await kubectl(['apply', '-f', '-'], yamlDocs(docs));
    // Ready means the migration ran and the operator wrote the registry: both over TLS.
    await waitHoltReady('tls', 1);
    const out = await holt('tls', ['forage', '--goal', 'finish over tls', '--watch']);
    expect(out).toContain('Workflow completed');
    expect((await trailOf('tls')).find((a) => a.type === 'Done')?.payload).toBe('over tls');
    // Nobody gets in in clear text: the Redis port speaks TLS only (redis-cli has the admin password).
    const redisCli = (args: string) =>
      kubectl([
        'exec',
        'tls-redis-0',
        '--',
        'sh',
        '-c',
        `timeout 5 redis-cli --user admin -h 127.0.0.1 ${args} ping 2>&1`,
      ]).catch((e: Error) => e.message);
    expect(await redisCli('')).not.toContain('PONG');
    expect(await redisCli('--tls --cacert /tls/ca.crt')).toContain('PONG');
  }, 600_000);
}
