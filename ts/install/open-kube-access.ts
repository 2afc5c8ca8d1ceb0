// The installer's own access to the Kubernetes API. In a pod: the pod's service account (its token,
// CA and namespace files in NETPLUG_SERVICEACCOUNT_DIR, the server from KUBERNETES_SERVICE_HOST and
// _PORT), as KubeConfig.loadFromCluster() builds it but from the given environment and directory.
// With KUBECONFIG set: that file (tests, a bare host). Neither: no API access (a bare host install).
import { existsSync, readFileSync } from 'node:fs';
import { isIPv6 } from 'node:net';
import { join } from 'node:path';

import * as k8s from '@kubernetes/client-node';

import type { InstallSettings } from './settings.ts';

export interface KubeAccess {
  config: k8s.KubeConfig;
  core: k8s.CoreV1Api;
  apps: k8s.AppsV1Api;
  /** The pod's namespace: where the ConfigMap, the DaemonSet and the CNI service account are. */
  namespace: string;
  /** The API server as the plugin's kubeconfig names it. */
  server: string;
  /** PEM of the CA the plugin's kubeconfig trusts, when known. */
  ca: string | undefined;
}

/** The server URL for a service host and port: an IPv6 address in brackets. */
function serverUrl(protocol: string, host: string, port: string): string {
  return `${protocol}://${isIPv6(host) ? `[${host}]` : host}:${port}`;
}

export function openKubeAccess(settings: InstallSettings): KubeAccess | undefined {
  const { env, serviceAccountDir } = settings;
  const tokenFile = join(serviceAccountDir, 'token');
  const inPod = existsSync(tokenFile);
  const config = new k8s.KubeConfig();
  const host = env.KUBERNETES_SERVICE_HOST;
  const port = env.KUBERNETES_SERVICE_PORT || '443';
  const protocol = env.KUBERNETES_SERVICE_PROTOCOL || 'https';
  const fileText = (path: string) => (existsSync(path) ? readFileSync(path, 'utf8') : undefined);
  let namespace = fileText(join(serviceAccountDir, 'namespace'))?.trim() || env.POD_NAMESPACE;
  let ca = fileText(join(serviceAccountDir, 'ca.crt'));
  if (env.KUBECONFIG) {
    config.loadFromFile(env.KUBECONFIG);
    namespace ||= config.getContextObject(config.getCurrentContext())?.namespace;
    const cluster = config.getCurrentCluster();
    ca ??= cluster?.caData
      ? Buffer.from(cluster.caData, 'base64').toString('utf8')
      : cluster?.caFile
        ? fileText(cluster.caFile)
        : undefined;
  } else if (inPod) {
    if (!host) throw new Error('KUBERNETES_SERVICE_HOST is not set: cannot reach the Kubernetes API from this pod');
    config.loadFromClusterAndUser(
      { name: 'in-cluster', server: serverUrl(protocol, host, port), caFile: join(serviceAccountDir, 'ca.crt'), skipTLSVerify: false },
      { name: 'in-cluster-user', authProvider: { name: 'tokenFile', config: { tokenFile } } },
    );
  } else {
    return undefined;
  }
  const server = host ? serverUrl(protocol, host, port) : (config.getCurrentCluster()?.server ?? '');
  return {
    config,
    core: config.makeApiClient(k8s.CoreV1Api),
    apps: config.makeApiClient(k8s.AppsV1Api),
    namespace: namespace || 'kube-system',
    server,
    ca,
  };
}
