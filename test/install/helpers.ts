// A node as netplug-install sees it, for the installer's tests: a temporary host root, an image
// source dir of small stand-in binaries, and (with a real kube-apiserver) the pod's namespace with
// the installer's ServiceAccount bound to exactly INSTALLER_RULES, the plugin's ServiceAccount
// bound to the shipped plugin ClusterRole, and a service-account dir (token, ca.crt, namespace)
// written from a real TokenRequest, as the kubelet projects it into the pod.
import { randomBytes } from 'node:crypto';
import { chmodSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

import type { ExecutionContext } from 'ava';
import type * as k8s from '@kubernetes/client-node';

import { runInstall } from '../../ts/install/main.ts';
import { tempDir } from '../helpers/cni.ts';
import type { Kube } from '../helpers/kube.ts';

/**
 * What netplug-install's own identity (the node pod's ServiceAccount netplug-node) needs, in the
 * pod's namespace: a token for the plugin's account, the template ConfigMap (read, then list and
 * watch by name), and its DaemonSet (to tell an uninstall from a restart). The lead puts these in
 * the manifest's Role.
 */
export const INSTALLER_RULES: k8s.V1PolicyRule[] = [
  { apiGroups: [''], resources: ['serviceaccounts/token'], verbs: ['create'], resourceNames: ['netplug-cni-plugin'] },
  { apiGroups: [''], resources: ['configmaps'], verbs: ['get', 'list', 'watch'], resourceNames: ['netplug-config'] },
  { apiGroups: ['apps'], resources: ['daemonsets'], verbs: ['get'], resourceNames: ['netplug-node'] },
];

export const BINARIES: Record<string, number> = {
  netplug: 0o755,
  'netplug-ipam': 0o755,
  portmap: 0o755,
  'netplug-dataplane.linux-x64-gnu.node': 0o644,
};

export interface Node {
  dir: string;
  root: string;
  source: string;
  env: NodeJS.ProcessEnv;
  /** Lines the installer logged. */
  log: string[];
  path(hostPath: string): string;
}

/** A host root and a source dir with `binaries`; env runs the installer outside a pod, once. */
export function makeNode(t: Pick<ExecutionContext, 'teardown'>, binaries: Record<string, number> = BINARIES): Node {
  const dir = tempDir(t, 'install');
  const root = join(dir, 'host');
  const source = join(dir, 'image-cni-bin');
  mkdirSync(root);
  mkdirSync(source);
  for (const [name, mode] of Object.entries(binaries)) writeSourceFile(source, name, mode);
  const node: Node = {
    dir,
    root,
    source,
    env: {
      NETPLUG_HOST_ROOT: root,
      NETPLUG_CNI_SOURCE_DIR: source,
      NETPLUG_SERVICEACCOUNT_DIR: join(dir, 'no-serviceaccount'),
      TLS_ASSETS_DIR: join(dir, 'no-secrets'),
      KUBERNETES_NODE_NAME: 'node-a',
      SLEEP: 'false',
    },
    log: [],
    path: (hostPath) => join(root, hostPath),
  };
  return node;
}

/** A stand-in binary: random content, so that each version differs. */
export function writeSourceFile(source: string, name: string, mode: number, size = 64 * 1024): void {
  writeFileSync(join(source, name), randomBytes(size));
  chmodSync(join(source, name), mode);
}

/** Runs the installer in this process; resolves to its exit code. `informers`: the quiet-watch timeout, if shortened. */
export function install(
  node: Node,
  env: NodeJS.ProcessEnv = {},
  signal = new AbortController().signal,
  argv: string[] = [],
  informers: { watchTimeoutMs?: number } = {},
): Promise<number> {
  return runInstall(argv, { ...node.env, ...env }, signal, (line) => node.log.push(line.trimEnd()), informers);
}

let namespaces = 0;

export interface PodNamespace {
  namespace: string;
  /** The installer's service-account dir. */
  saDir: string;
  /** The env of an installer running in a pod of this namespace. */
  env: NodeJS.ProcessEnv;
}

/** A namespace standing for kube-system, with the installer's and the plugin's accounts. */
export async function podNamespace(kube: Kube, t: Pick<ExecutionContext, 'teardown'>): Promise<PodNamespace> {
  const namespace = `install-${process.pid}-${namespaces++}`;
  await kube.core.createNamespace({ body: { metadata: { name: namespace } } });
  for (const name of ['netplug-node', 'netplug-cni-plugin'])
    await kube.core.createNamespacedServiceAccount({ namespace, body: { metadata: { name } } });
  await kube.rbac.createNamespacedRole({ namespace, body: { metadata: { name: 'netplug-install' }, rules: INSTALLER_RULES } });
  await kube.rbac.createNamespacedRoleBinding({
    namespace,
    body: {
      metadata: { name: 'netplug-install' },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'netplug-install' },
      subjects: [{ kind: 'ServiceAccount', name: 'netplug-node', namespace }],
    },
  });
  // The shipped plugin ClusterRole (deploy/rbac/netplug-cni.yaml), as startKube created it.
  await kube.rbac.createClusterRoleBinding({
    body: {
      metadata: { name: `${namespace}-netplug-cni-plugin` },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: kube.server.plugin.user },
      subjects: [{ kind: 'ServiceAccount', name: 'netplug-cni-plugin', namespace }],
    },
  });
  const issued = await kube.core.createNamespacedServiceAccountToken({
    name: 'netplug-node',
    namespace,
    body: { spec: { audiences: [], expirationSeconds: 3600 } },
  });
  const saDir = join(tempDir(t, 'install-sa'), 'serviceaccount');
  mkdirSync(saDir);
  writeFileSync(join(saDir, 'token'), issued.status?.token ?? '');
  writeFileSync(join(saDir, 'ca.crt'), readFileSync(kube.server.ca));
  writeFileSync(join(saDir, 'namespace'), namespace);
  const { hostname, port } = new URL(kube.server.url);
  return {
    namespace,
    saDir,
    env: {
      NETPLUG_SERVICEACCOUNT_DIR: saDir,
      KUBERNETES_SERVICE_HOST: hostname,
      KUBERNETES_SERVICE_PORT: port,
      NETPLUG_CONFIG_MAP: 'netplug-config',
    },
  };
}

/** A DaemonSet netplug-node as the manifest has it (no controller runs it here). */
export async function createDaemonSet(apps: k8s.AppsV1Api, namespace: string, finalizers: string[] = []): Promise<void> {
  await apps.createNamespacedDaemonSet({
    namespace,
    body: {
      metadata: { name: 'netplug-node', finalizers },
      spec: {
        selector: { matchLabels: { 'k8s-app': 'netplug-node' } },
        template: {
          metadata: { labels: { 'k8s-app': 'netplug-node' } },
          spec: { containers: [{ name: 'install-cni', image: 'localhost/netplug:test' }] },
        },
      },
    },
  });
}
