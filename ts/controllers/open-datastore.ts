// netplug's datastore for the controllers: etcd from ETCD_*, or the Kubernetes API's custom
// resources through the kubeconfig in KUBECONFIG, else (in a pod) the pod's service account.
import { readFileSync } from 'node:fs';

import { KubeClient } from '../k8s/client.ts';
import { KubeSettingsError } from '../k8s/kubeconfig.ts';
import { TokenFile } from '../k8s/credentials.ts';
import { openStore } from '../store/open.ts';
import { KubeStore } from '../store/kubernetes/store.ts';
import type { Store } from '../store/store.ts';
import type { ControllersSettings } from './settings.ts';

const SERVICE_ACCOUNT = '/var/run/secrets/kubernetes.io/serviceaccount';

export async function openDatastore(settings: ControllersSettings, env: NodeJS.ProcessEnv): Promise<Store> {
  if (settings.datastore.datastore_type === 'kubernetes' && !settings.kubeconfig) return new KubeStore(new KubeClient(inCluster(env)));
  return openStore(settings.datastore);
}

/** The API as a pod reaches it: the kubernetes Service's address, the cluster CA, the projected token (reread as it rotates). */
function inCluster(env: NodeJS.ProcessEnv) {
  const host = env['KUBERNETES_SERVICE_HOST'];
  const port = env['KUBERNETES_SERVICE_PORT'];
  const fail = (message: string) => new KubeSettingsError('kubernetes', `in-cluster configuration: ${message}`);
  if (!host || !port) throw fail('KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are not set (not in a pod?); set KUBECONFIG');
  let ca: Buffer;
  try {
    ca = readFileSync(`${SERVICE_ACCOUNT}/ca.crt`);
  } catch (err) {
    throw fail(`${SERVICE_ACCOUNT}/ca.crt: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
  }
  return {
    server: new URL(`https://${host.includes(':') ? `[${host}]` : host}:${port}`),
    tls: { ca },
    tlsOrigins: { ca: `${SERVICE_ACCOUNT}/ca.crt` },
    credentials: new TokenFile(`${SERVICE_ACCOUNT}/token`, undefined, fail),
    user: 'serviceaccount',
  };
}
