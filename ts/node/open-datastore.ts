// How netplug-node reaches its two APIs: the Kubernetes API through @kubernetes/client-node (the
// Node it follows, kubeadm's ConfigMap), and netplug's datastore through ts/store (etcd, or the
// Kubernetes API's custom resources). KUBECONFIG names a kubeconfig (tests, or outside a pod);
// else the pod's service account is used, as client-go's in-cluster configuration does.
import { readFileSync } from 'node:fs';

import * as k8s from '@kubernetes/client-node';

import { KubeClient } from '../k8s/client.ts';
import { TokenFile } from '../k8s/credentials.ts';
import { KubeSettingsError } from '../k8s/kubeconfig.ts';
import { openStore } from '../store/open.ts';
import { KubeStore } from '../store/kubernetes/store.ts';
import type { Store } from '../store/store.ts';
import type { NodeSettings } from './settings.ts';

const SERVICE_ACCOUNT = '/var/run/secrets/kubernetes.io/serviceaccount';

export function kubeConfigOf(settings: NodeSettings): k8s.KubeConfig {
  const config = new k8s.KubeConfig();
  if (settings.kubeconfig) config.loadFromFile(settings.kubeconfig);
  else config.loadFromCluster();
  return config;
}

export async function openNodeStore(settings: NodeSettings, env: NodeJS.ProcessEnv): Promise<Store> {
  if (settings.datastoreType === 'etcdv3') return openStore(settings.etcd);
  if (settings.kubeconfig) return openStore({ datastore_type: 'kubernetes', kubernetes: { kubeconfig: settings.kubeconfig } });
  return new KubeStore(new KubeClient(inClusterAccess(env)));
}

/** The API server and credentials a pod is given: the service's address, the CA and the token, re-read as the kubelet renews it. */
function inClusterAccess(env: NodeJS.ProcessEnv) {
  const host = env['KUBERNETES_SERVICE_HOST'];
  const port = env['KUBERNETES_SERVICE_PORT'];
  if (!host || !port)
    throw new KubeSettingsError(
      'KUBERNETES_SERVICE_HOST',
      'not in a pod (KUBERNETES_SERVICE_HOST and _PORT are not set) and KUBECONFIG is not set',
    );
  const fail = (message: string) => new KubeSettingsError('serviceaccount', `${SERVICE_ACCOUNT}: ${message}`);
  let ca: Buffer;
  try {
    ca = readFileSync(`${SERVICE_ACCOUNT}/ca.crt`);
  } catch (err) {
    throw fail(`ca.crt: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
  }
  return {
    server: new URL(`https://${host.includes(':') ? `[${host}]` : host}:${port}`),
    tls: { ca },
    tlsOrigins: { ca: `${SERVICE_ACCOUNT}/ca.crt` },
    credentials: new TokenFile(`${SERVICE_ACCOUNT}/token`, undefined, fail),
    user: 'netplug-node',
  };
}
