// A real kube-apiserver for a test file (scripts/lib/kube-server.ts), an administrator client
// (@kubernetes/client-node) for fixtures, and netplug's plugin identity with exactly the
// permissions the shipped ClusterRoles (deploy/rbac/netplug-cni.yaml) give: get on pods,
// namespaces and nodes; with the Kubernetes datastore, netplug's custom resources too.
import { existsSync, readFileSync, rmSync } from 'node:fs';
import { dirname, join } from 'node:path';

import type { ExecutionContext } from 'ava';
import * as k8s from '@kubernetes/client-node';

import { launchKubeApiserver, type Identity, type KubeServer } from '../../scripts/lib/kube-server.ts';
import { installCrds as installNetplugCrds } from '../../scripts/lib/netplug-crds.ts';
import { IPAM_LOCK_FILE } from '../../ts/ipam/turns.ts';
import { ROOT, tempDir } from './cni.ts';

export interface Kube {
  server: KubeServer;
  /** The administrator's kubeconfig, loaded: for the clients a test makes besides these. */
  config: k8s.KubeConfig;
  core: k8s.CoreV1Api;
  rbac: k8s.RbacAuthorizationV1Api;
  /** netplug's custom resources (and any other). */
  custom: k8s.CustomObjectsApi;
  /** An identity bound to `rules` only. */
  identityWith(user: string, rules: k8s.V1PolicyRule[]): Promise<Identity>;
}

const shippedRoles = k8s.loadAllYaml(readFileSync(join(ROOT, 'deploy/rbac/netplug-cni.yaml'), 'utf8')) as k8s.V1ClusterRole[];
const shippedRules = (name: string): k8s.V1PolicyRule[] => shippedRoles.find((role) => role.metadata?.name === name)?.rules ?? [];

/** What netplug's CNI plugin needs in Kubernetes mode with the etcd datastore. */
export const PLUGIN_RULES = shippedRules('netplug-cni');
/** What it needs besides with the Kubernetes datastore. */
export const DATASTORE_RULES = shippedRules('netplug-cni-kubernetes-datastore');

export async function startKube(t: Pick<ExecutionContext, 'teardown'>): Promise<Kube> {
  const server = await launchKubeApiserver(tempDir(t, 'kube'), { goGc: 400 });
  t.teardown(() => server.stop());
  const config = new k8s.KubeConfig();
  config.loadFromFile(server.admin.kubeconfig);
  const core = config.makeApiClient(k8s.CoreV1Api);
  const rbac = config.makeApiClient(k8s.RbacAuthorizationV1Api);
  const custom = config.makeApiClient(k8s.CustomObjectsApi);
  const identityWith = async (user: string, rules: k8s.V1PolicyRule[]) => {
    const identity = user === server.plugin.user ? server.plugin : server.identity(user);
    await rbac.createClusterRole({ body: { metadata: { name: user }, rules } });
    await rbac.createClusterRoleBinding({
      body: {
        metadata: { name: user },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: user },
        subjects: [{ kind: 'User', name: user }],
      },
    });
    return identity;
  };
  await identityWith(server.plugin.user, PLUGIN_RULES);
  return { server, config, core, rbac, custom, identityWith };
}

/** netplug's custom resource definitions (deploy/crds/), installed as an operator would, and ready to use. */
/**
 * netplug-ipam on the Kubernetes datastore takes a host-wide lock file: removed after the test (or
 * file) if it was not there before, with its directory.
 */
export function removeIpamLockFileAfter(t: Pick<ExecutionContext, 'teardown'>): void {
  const lockDirExisted = existsSync(dirname(IPAM_LOCK_FILE));
  const lockExisted = existsSync(IPAM_LOCK_FILE);
  t.teardown(() => {
    if (!lockExisted) rmSync(IPAM_LOCK_FILE, { force: true });
    if (!lockDirExisted) rmSync(dirname(IPAM_LOCK_FILE), { recursive: true, force: true });
  });
}

export const installCrds = (kube: Kube): Promise<void> => installNetplugCrds(kube.server.admin.kubeconfig);

let pods = 0;

/** A namespace (with annotations) and a pod in it, as the API server would hold them when the kubelet runs the pod. */
export async function createPod(
  kube: Kube,
  options: {
    namespace?: string;
    namespaceAnnotations?: Record<string, string>;
    name?: string;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
    serviceAccount?: string;
    ports?: k8s.V1ContainerPort[];
  } = {},
): Promise<{ namespace: string; name: string }> {
  const n = pods++;
  const namespace = options.namespace ?? `ns-${process.pid}-${n}`;
  await kube.core
    .readNamespace({ name: namespace })
    .catch(() => kube.core.createNamespace({ body: { metadata: { name: namespace, annotations: options.namespaceAnnotations ?? {} } } }));
  const name = options.name ?? `pod-${n}`;
  await kube.core.createNamespacedPod({
    namespace,
    body: {
      metadata: { name, labels: options.labels ?? {}, annotations: options.annotations ?? {} },
      spec: {
        serviceAccountName: options.serviceAccount ?? 'default',
        containers: [{ name: 'main', image: 'busybox', ports: options.ports ?? [] }],
      },
    },
  });
  return { namespace, name };
}

/** A Node with `labels` (and `status`, as its kubelet would report it), deleted after the test. */
export async function createNode(
  kube: Kube,
  t: Pick<ExecutionContext, 'teardown'>,
  name: string,
  labels: Record<string, string> = {},
  status?: k8s.V1NodeStatus,
): Promise<void> {
  await kube.core.createNode({ body: { metadata: { name, labels }, ...(status ? { status } : {}) } });
  t.teardown(() => kube.core.deleteNode({ name }).catch(() => undefined));
}

/** CNI_ARGS as a Kubernetes runtime gives them. */
export const podArgs = (pod: { namespace: string; name: string }, containerId: string, extra = '') =>
  `IgnoreUnknown=1;K8S_POD_NAMESPACE=${pod.namespace};K8S_POD_NAME=${pod.name};K8S_POD_INFRA_CONTAINER_ID=${containerId}${extra}`;

/**
 * A ServiceAccount bound to the plugin's ClusterRole, as an installer binds the account whose token
 * it writes into the plugin's kubeconfig, and a token for it from a real TokenRequest.
 */
export async function serviceAccountToken(kube: Kube, name: string, expirationSeconds = 3600): Promise<string> {
  const namespace = `netplug-sa-${process.pid}`;
  await kube.core.readNamespace({ name: namespace }).catch(() => kube.core.createNamespace({ body: { metadata: { name: namespace } } }));
  await kube.core.createNamespacedServiceAccount({ namespace, body: { metadata: { name } } });
  await kube.rbac.createClusterRoleBinding({
    body: {
      metadata: { name: `${namespace}-${name}` },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: kube.server.plugin.user },
      subjects: [{ kind: 'ServiceAccount', name, namespace }],
    },
  });
  const issued = await kube.core.createNamespacedServiceAccountToken({
    name,
    namespace,
    body: { spec: { audiences: [], expirationSeconds } },
  });
  const token = issued.status?.token;
  if (!token) throw new Error(`the TokenRequest for ${namespace}/${name} returned no token`);
  return token;
}
