import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { sh } from './sh.ts';

export interface ClusterPki {
  caCert: string;
  caKey: string;
  /** The API server's serving certificate (names: loopback, the bridge address, the Service IP and DNS). */
  apiserverCert: string;
  apiserverKey: string;
  /** The API server's client certificate towards kubelets (logs, exec, port-forward). */
  kubeletClientCert: string;
  kubeletClientKey: string;
}

/**
 * One cluster CA (openssl, P-256) and the two certificates signed by it. Kubelets trust the CA for
 * client certificates, so only the API server can call them; pods get the CA as kube-root-ca.crt.
 */
export function makePki(dir: string, sans: { ips: string[]; dns: string[] }): ClusterPki {
  const f = (n: string) => join(dir, n);
  const key = (out: string) =>
    sh('openssl', ['genpkey', '-algorithm', 'EC', '-pkeyopt', 'ec_paramgen_curve:P-256', '-out', out]);
  key(f('ca.key'));
  sh('openssl', [
    'req',
    '-x509',
    '-new',
    '-key',
    f('ca.key'),
    '-out',
    f('ca.crt'),
    '-days',
    '3650',
    '-subj',
    '/CN=holt-local-cluster-ca',
    '-addext',
    'basicConstraints=critical,CA:TRUE',
    '-addext',
    'keyUsage=critical,keyCertSign,cRLSign',
  ]);
  const sign = (name: string, subject: string, ext: string) => {
    key(f(`${name}.key`));
    sh('openssl', ['req', '-new', '-key', f(`${name}.key`), '-out', f(`${name}.csr`), '-subj', subject]);
    writeFileSync(f(`${name}.ext`), ext);
    sh('openssl', [
      'x509',
      '-req',
      '-in',
      f(`${name}.csr`),
      '-CA',
      f('ca.crt'),
      '-CAkey',
      f('ca.key'),
      '-CAcreateserial',
      '-out',
      f(`${name}.crt`),
      '-days',
      '825',
      '-extfile',
      f(`${name}.ext`),
    ]);
  };
  const san = [...sans.ips.map((i) => `IP:${i}`), ...sans.dns.map((d) => `DNS:${d}`)].join(',');
  sign(
    'apiserver',
    '/CN=kube-apiserver',
    `subjectAltName=${san}\nextendedKeyUsage=serverAuth\nkeyUsage=critical,digitalSignature\n`,
  );
  sign(
    'kubelet-client',
    '/O=system:masters/CN=kube-apiserver-kubelet-client',
    'extendedKeyUsage=clientAuth\nkeyUsage=critical,digitalSignature\n',
  );
  return {
    caCert: f('ca.crt'),
    caKey: f('ca.key'),
    apiserverCert: f('apiserver.crt'),
    apiserverKey: f('apiserver.key'),
    kubeletClientCert: f('kubelet-client.crt'),
    kubeletClientKey: f('kubelet-client.key'),
  };
}
