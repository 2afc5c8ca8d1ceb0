// The API server as a pod reaches it, as client-go's in-cluster configuration does: the
// kubernetes Service's address, the cluster CA and the projected service-account token (reread
// as the kubelet rotates it). For the long-running components' datastore clients.
import { readFileSync } from 'node:fs';

import { KubeClient, type KubeClientOptions } from './client.ts';
import { TokenFile } from './credentials.ts';
import { KubeSettingsError } from './kubeconfig.ts';

const SERVICE_ACCOUNT_DIR = '/var/run/secrets/kubernetes.io/serviceaccount';

export function inClusterClient(env: NodeJS.ProcessEnv, user: string, options: KubeClientOptions = {}): KubeClient {
  const host = env['KUBERNETES_SERVICE_HOST'];
  const port = env['KUBERNETES_SERVICE_PORT'];
  const fail = (message: string) => new KubeSettingsError('kubernetes', `in-cluster configuration: ${message}`);
  if (!host || !port) throw fail('KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are not set (not in a pod?); set KUBECONFIG');
  let ca: Buffer;
  try {
    ca = readFileSync(`${SERVICE_ACCOUNT_DIR}/ca.crt`);
  } catch (err) {
    throw fail(`${SERVICE_ACCOUNT_DIR}/ca.crt: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
  }
  return new KubeClient(
    {
      server: new URL(`https://${host.includes(':') ? `[${host}]` : host}:${port}`),
      tls: { ca },
      tlsOrigins: { ca: `${SERVICE_ACCOUNT_DIR}/ca.crt` },
      credentials: new TokenFile(`${SERVICE_ACCOUNT_DIR}/token`, undefined, fail),
      user,
    },
    options,
  );
}
