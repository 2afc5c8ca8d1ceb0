// The test cluster's certificates (openssl, EC P-256, as kube-server.ts makes them): one CA, the
// API server's serving certificate valid for every address a client inside the node's network
// namespace uses (loopback, the node IP, the `kubernetes` Service's ClusterIP and names), the
// service-account key pair, and client identities with kubeconfigs.
import { execFileSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

export interface ClusterIdentity {
  /** The certificate's CN: the Kubernetes user name. */
  user: string;
  cert: string;
  key: string;
  /** A kubeconfig reaching the API server from inside the node's network namespace. */
  kubeconfig: string;
}

export interface ClusterCerts {
  dir: string;
  ca: string;
  caKey: string;
  serving: { cert: string; key: string };
  serviceAccountKey: string;
  serviceAccountPub: string;
  /** Makes a client certificate (CN=user, O=group) and a kubeconfig for `server`. */
  identity(user: string, group: string | undefined, server: string): ClusterIdentity;
}

export function makeClusterCerts(dir: string, addresses: { nodeIp: string; serviceIp: string }): ClusterCerts {
  mkdirSync(dir, { recursive: true });
  const ssl = (...args: string[]) => execFileSync('openssl', args, { cwd: dir, stdio: 'ignore' });
  const ecKey = (name: string) => ssl('genpkey', '-algorithm', 'EC', '-pkeyopt', 'ec_paramgen_curve:P-256', '-out', `${name}.key`);
  ecKey('ca');
  ssl('req', '-x509', '-new', '-key', 'ca.key', '-out', 'ca.pem', '-days', '2', '-subj', '/CN=netplug test cluster CA');
  const sign = (name: string, subject: string, extensions: string) => {
    ecKey(name);
    writeFileSync(join(dir, `${name}.ext`), extensions);
    ssl('req', '-new', '-key', `${name}.key`, '-out', `${name}.csr`, '-subj', subject);
    ssl(
      'x509',
      '-req',
      '-in',
      `${name}.csr`,
      '-CA',
      'ca.pem',
      '-CAkey',
      'ca.key',
      '-CAcreateserial',
      '-out',
      `${name}.pem`,
      '-days',
      '2',
      '-extfile',
      `${name}.ext`,
    );
  };
  const names = ['kubernetes', 'kubernetes.default', 'kubernetes.default.svc', 'kubernetes.default.svc.cluster.local', 'localhost'];
  sign(
    'serving',
    '/CN=kube-apiserver',
    `subjectAltName=IP:127.0.0.1,IP:${addresses.nodeIp},IP:${addresses.serviceIp},${names.map((name) => `DNS:${name}`).join(',')}\nextendedKeyUsage=serverAuth\n`,
  );
  ecKey('service-accounts');
  ssl('pkey', '-in', 'service-accounts.key', '-pubout', '-out', 'service-accounts.pub');

  const identity = (user: string, group: string | undefined, server: string): ClusterIdentity => {
    const name = `user-${user.replace(/[^a-z0-9]/gi, '-')}`;
    sign(name, `/CN=${user}${group ? `/O=${group}` : ''}`, 'extendedKeyUsage=clientAuth\n');
    const kubeconfig = join(dir, `${name}.kubeconfig`);
    writeFileSync(kubeconfig, kubeconfigText(server, join(dir, 'ca.pem'), user, join(dir, `${name}.pem`), join(dir, `${name}.key`)));
    return { user, cert: join(dir, `${name}.pem`), key: join(dir, `${name}.key`), kubeconfig };
  };
  return {
    dir,
    ca: join(dir, 'ca.pem'),
    caKey: join(dir, 'ca.key'),
    serving: { cert: join(dir, 'serving.pem'), key: join(dir, 'serving.key') },
    serviceAccountKey: join(dir, 'service-accounts.key'),
    serviceAccountPub: join(dir, 'service-accounts.pub'),
    identity,
  };
}

/** A kubeconfig in YAML, as they usually are, with file references rather than embedded data. */
export function kubeconfigText(server: string, ca: string, user: string, cert: string, key: string): string {
  return [
    'apiVersion: v1',
    'kind: Config',
    'clusters:',
    '- name: netplug-test',
    '  cluster:',
    `    server: ${server}`,
    `    certificate-authority: ${ca}`,
    'users:',
    `- name: ${user}`,
    '  user:',
    `    client-certificate: ${cert}`,
    `    client-key: ${key}`,
    'contexts:',
    '- name: netplug-test',
    '  context:',
    '    cluster: netplug-test',
    `    user: ${user}`,
    'current-context: netplug-test',
    '',
  ].join('\n');
}
