// The test cluster's certificates (openssl, EC P-256, as kube-server.ts makes them): one CA, the
// API server's serving certificate valid for every address a client inside the node's network
// namespace uses (loopback, the node IP, the `kubernetes` Service's ClusterIP and names), the
// service-account key pair, and client identities with kubeconfigs.
import { execFile } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';

import { kubeconfigText, makeTestCa } from './test-ca.ts';

const run = promisify(execFile);

interface ClusterIdentity {
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
  identity(user: string, group: string | undefined, server: string): Promise<ClusterIdentity>;
}

/** Keys and certificates are made concurrently: openssl's key generation dominates the cluster's start otherwise. */
export async function makeClusterCerts(dir: string, addresses: { nodeIp: string; serviceIp: string }): Promise<ClusterCerts> {
  const testCa = makeTestCa(dir, 'netplug test cluster CA');
  const sign = testCa.sign;
  const ssl = (...args: string[]) => run('openssl', args, { cwd: dir });
  const names = ['kubernetes', 'kubernetes.default', 'kubernetes.default.svc', 'kubernetes.default.svc.cluster.local', 'localhost'];
  const serving = sign(
    'serving',
    '/CN=kube-apiserver',
    `subjectAltName=IP:127.0.0.1,IP:${addresses.nodeIp},IP:${addresses.serviceIp},${names.map((name) => `DNS:${name}`).join(',')}\nextendedKeyUsage=serverAuth\n`,
  );
  const serviceAccounts = testCa
    .key('service-accounts')
    .then(() => ssl('pkey', '-in', 'service-accounts.key', '-pubout', '-out', 'service-accounts.pub'));
  await Promise.all([serving, serviceAccounts]);

  const identity = async (user: string, group: string | undefined, server: string): Promise<ClusterIdentity> => {
    const name = `user-${user.replace(/[^a-z0-9]/gi, '-')}`;
    await sign(name, `/CN=${user}${group ? `/O=${group}` : ''}`, 'extendedKeyUsage=clientAuth\n');
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
