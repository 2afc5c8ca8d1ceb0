// What is installed, read from the cluster rather than asked: the
// install method (a helm release of the netplug-operator chart, the operator's Deployment, or the
// manifest's DaemonSet in kube-system), the datastore, the IPAM, the `upgrade-ipam` init container
// and the version each node runs.
import { gunzipSync } from 'node:zlib';

import type { Json, UpgradeKube } from './kube.ts';
import { variantOf, ipamOfTemplate, type Variant } from './variant.ts';
import { versionOfImage } from './versions.ts';

type Method = 'helm' | 'operator' | 'manifest';

export const NODE_DAEMONSET = 'netplug-node';
export const CONTROLLERS_DEPLOYMENT = 'netplug-kube-controllers';
export const OPERATOR_DEPLOYMENT = 'netplug-operator';
const CHART_NAME = 'netplug-operator';
const MANIFEST_NAMESPACE = 'kube-system';
const OPERATOR_SYSTEM_NAMESPACE = 'netplug-system';

export interface HelmRelease {
  name: string;
  namespace: string;
  revision: number;
  status: string;
  chartVersion: string;
}

export interface NodeVersion {
  node: string;
  pod: string;
  version: string | undefined;
  ready: boolean;
}

export interface Install {
  method: Method;
  /** Where netplug-node and the controllers run: kube-system (manifests) or netplug-system (operator). */
  namespace: string;
  /** The operator's namespace (operator and helm installs). */
  operatorNamespace?: string | undefined;
  helm?: HelmRelease | undefined;
  datastore: Variant['datastore'];
  ipam: Variant['ipam'];
  /** Manifest installs: what carries pods between nodes (netplug, flannel in netplug-node, or the cluster: policy only). */
  networking: Variant['networking'];
  /** USE_POD_CIDR=true on the netplug-node container. */
  usePodCidr: boolean;
  /** The init container `upgrade-ipam` is on the live DaemonSet. */
  upgradeIpam: boolean;
  /** The etcd endpoints netplug-config names (etcd installs). */
  etcdEndpoints?: string | undefined;
  /** Each node pod's version (its image tag). */
  nodes: NodeVersion[];
  /** Versions of what runs: the node DaemonSet's and the operator's image tags. */
  imageVersions: string[];
  daemonSet?: Json | undefined;
}

export class NotInstalled extends Error {
  override readonly name = 'NotInstalled';
}

export async function detectInstall(kube: UpgradeKube): Promise<Install> {
  const helm = await findHelmRelease(kube);
  const operators = await kube.list('apps/v1', 'Deployment', undefined, `k8s-app=${OPERATOR_DEPLOYMENT}`);
  const operator = operators.find((d) => d.metadata.name === OPERATOR_DEPLOYMENT);
  let method: Method;
  let namespace: string;
  if (helm) {
    method = 'helm';
    namespace = OPERATOR_SYSTEM_NAMESPACE;
  } else if (operator) {
    method = 'operator';
    namespace = OPERATOR_SYSTEM_NAMESPACE;
  } else {
    method = 'manifest';
    namespace = MANIFEST_NAMESPACE;
  }
  const daemonSet = await kube.getOrNothing({ apiVersion: 'apps/v1', kind: 'DaemonSet', name: NODE_DAEMONSET, namespace });
  if (method === 'manifest' && !daemonSet)
    throw new NotInstalled(
      `netplug is not installed here: no helm release of the ${CHART_NAME} chart, no Deployment ${OPERATOR_DEPLOYMENT}, no DaemonSet ${MANIFEST_NAMESPACE}/${NODE_DAEMONSET}`,
    );
  const pod = daemonSet?.spec?.template?.spec ?? {};
  const agent = (pod.containers ?? []).find((c: Json) => c.name === NODE_DAEMONSET) ?? {};
  const env = new Map<string, string>(
    (agent.env ?? []).filter((e: Json) => typeof e.value === 'string').map((e: Json) => [e.name, e.value]),
  );
  const config =
    method === 'manifest' ? await kube.getOrNothing({ apiVersion: 'v1', kind: 'ConfigMap', name: 'netplug-config', namespace }) : undefined;
  const { datastore, networking } = variantOf(daemonSet, config);
  const ipam = await ipamOf(kube, method, config);
  const imageVersions = [
    ...(pod.containers ?? []).map((c: Json) => versionOfImage(c.image)),
    ...(operator ? operator.spec.template.spec.containers.map((c: Json) => versionOfImage(c.image)) : []),
  ].filter((v): v is string => v !== undefined);
  return {
    method,
    namespace,
    operatorNamespace: helm?.namespace ?? operator?.metadata.namespace,
    helm,
    datastore,
    ipam,
    networking,
    usePodCidr: env.get('USE_POD_CIDR') === 'true',
    upgradeIpam: (pod.initContainers ?? []).some((c: Json) => c.name === 'upgrade-ipam'),
    etcdEndpoints: config?.data?.etcd_endpoints,
    nodes: await nodeVersions(kube, namespace),
    imageVersions: [...new Set(imageVersions)],
    daemonSet,
  };
}

/** The IPAM of the conflist template (the ConfigMap's, or the operator's Installation). */
async function ipamOf(kube: UpgradeKube, method: Method, config: Json | undefined): Promise<Install['ipam']> {
  if (method !== 'manifest') {
    const installation = await kube.getOrNothing({ apiVersion: 'operator.projectnet.org/v1', kind: 'Installation', name: 'default' });
    const spec = installation?.spec ?? {};
    const type = spec.cni?.ipam?.type ?? spec.calicoNetwork?.cni?.ipam?.type ?? spec.cni?.ipam?.plugin;
    return type === 'HostLocal' ? 'host-local' : 'netplug-ipam';
  }
  return ipamOfTemplate(config?.data?.cni_network_config);
}

export async function nodeVersions(kube: UpgradeKube, namespace: string): Promise<NodeVersion[]> {
  const pods = await kube.list('v1', 'Pod', namespace, `k8s-app=${NODE_DAEMONSET}`);
  return pods
    .map((pod) => {
      const agent = (pod.spec.containers ?? []).find((c: Json) => c.name === NODE_DAEMONSET) ?? pod.spec.containers?.[0];
      const ready = (pod.status?.conditions ?? []).some((c: Json) => c.type === 'Ready' && c.status === 'True');
      return { node: pod.spec.nodeName ?? '(unscheduled)', pod: pod.metadata.name, version: versionOfImage(agent?.image), ready };
    })
    .sort((a, b) => a.node.localeCompare(b.node));
}

/** The newest release of the netplug-operator chart (helm's release Secrets `sh.helm.release.v1.<name>.v<N>`). */
export async function findHelmRelease(kube: UpgradeKube): Promise<HelmRelease | undefined> {
  const secrets = await kube.list('v1', 'Secret', undefined, 'owner=helm');
  const releases = new Map<string, HelmRelease>();
  for (const secret of secrets) {
    if (secret.type !== 'helm.sh/release.v1') continue;
    const release = decodeRelease(secret.data?.release);
    if (release?.chart?.metadata?.name !== CHART_NAME) continue;
    const found: HelmRelease = {
      name: release.name,
      namespace: secret.metadata.namespace,
      revision: release.version,
      status: release.info?.status ?? secret.metadata.labels?.status ?? 'unknown',
      chartVersion: release.chart.metadata.version,
    };
    const key = `${found.namespace}/${found.name}`;
    if ((releases.get(key)?.revision ?? 0) < found.revision) releases.set(key, found);
  }
  const live = [...releases.values()].filter((r) => r.status !== 'uninstalled');
  return live.sort((a, b) => b.revision - a.revision)[0];
}

/** A release Secret's `release` field: base64 (the Secret's) of base64 of gzipped JSON. */
function decodeRelease(data: string | undefined): Json | undefined {
  if (!data) return undefined;
  try {
    const inner = Buffer.from(Buffer.from(data, 'base64').toString('utf8'), 'base64');
    return JSON.parse(gunzipSync(inner).toString('utf8'));
  } catch {
    return undefined;
  }
}
