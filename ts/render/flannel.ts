// The flannel install variant (deploy/manifests/netplug-flannel.yaml, and -etcd.yaml), the
// reference's canal: netplug enforces network policy as in the policy-only install (host-local in
// each node's pod CIDR, NETPLUG_NETWORKING_BACKEND=none) and flannel's flanneld carries pods between
// nodes: VXLAN, each node's subnet its spec.podCIDR (--kube-subnet-mgr, on either of netplug's
// datastores), masquerade to outside the pod network. flanneld is a third container of the
// netplug-node pod, as kube-flannel is of canal's node pod: one DaemonSet to roll out and wait
// for, and a node's pod is Ready only when both its policy and its routes are. Its image,
// localhost/netplug-flannel (scripts/build-flannel-image.ts), is flanneld built from the Go module
// proxy with Debian's iptables, kept apart so that netplug's own image does not carry it.
import { fromConfig } from './config.ts';
import { renderManifest } from './manifests.ts';
import { CONFIG_MAP, IMAGE_REPOSITORY, type KubeObject, NODE, type RenderOptions, SERVICE_ENDPOINT_CONFIG_MAP } from './objects.ts';

/** The flannel release scripts/flannel/go.mod pins; scripts/build-flannel-image.ts checks they agree. */
export const FLANNEL_VERSION = 'v0.28.10';
export const FLANNEL_IMAGE = `${IMAGE_REPOSITORY}-flannel:${FLANNEL_VERSION}`;
const FLANNEL = 'flannel';

/** Bytes VXLAN adds over an IPv4 underlay (outer IPv4, UDP, VXLAN and inner Ethernet headers). */
const VXLAN_OVERHEAD = 50;
/**
 * Pods' MTU: a 1500-byte underlay's, less VXLAN's. netplug-node's "0" (auto) measures the underlay
 * alone, since it programs no tunnels here, and a pod's full-size packet would not fit once flannel
 * wraps it.
 */
const FLANNEL_POD_MTU = 1500 - VXLAN_OVERHEAD;
/** flanneld's /healthz and /readyz, on the loopback (the pod is on the host network). */
const FLANNEL_HEALTH_PORT = 9097;
/** The ConfigMap key of flannel's net-conf.json. */
const NET_CONF_KEY = 'flannel_net_conf';

export function renderFlannelManifest(options: Pick<RenderOptions, 'datastore' | 'namespace' | 'image'>): KubeObject[] {
  const objects = renderManifest({ ...options, ipam: 'host-local', networking: 'none' });
  const config = objects.find((object) => object.kind === 'ConfigMap' && object.metadata.name === CONFIG_MAP) as
    | (KubeObject & { data: Record<string, string> })
    | undefined;
  const nodeIndex = objects.findIndex((object) => object.kind === 'DaemonSet' && object.metadata.name === NODE);
  const pod = (objects[nodeIndex] as { spec?: { template?: { spec?: PodSpec } } } | undefined)?.spec?.template?.spec;
  if (!config || !pod) throw new Error('renderFlannelManifest: the manifest has no netplug-config or netplug-node DaemonSet');
  const { cni_network_config: conflist, ...data } = config.data;
  config.data = {
    ...data,
    veth_mtu: String(FLANNEL_POD_MTU),
    // flannel's own network configuration: Network must hold every node's pod CIDR (the cluster's
    // --cluster-cidr, kubeadm's networking.podSubnet).
    [NET_CONF_KEY]: `${JSON.stringify({ Network: '10.244.0.0/16', Backend: { Type: 'vxlan' } }, null, 2)}\n`,
    // The interface (name or address) flannel's VXLAN uses between nodes; "": that of the default route.
    flannel_iface: '',
    // "true": flanneld masquerades pods' traffic leaving the pod network (netplug's natOutgoing is off here).
    flannel_masquerade: 'true',
    cni_network_config: conflist as string,
  };
  pod.containers.push(flanneld(options.namespace));
  pod.volumes.push(
    { name: 'flannel-run', hostPath: { path: '/run/flannel', type: 'DirectoryOrCreate' } },
    { name: 'flannel-cfg', configMap: { name: CONFIG_MAP, items: [{ key: NET_CONF_KEY, path: 'net-conf.json' }] } },
  );
  objects.splice(nodeIndex, 0, ...flannelRbac(options.namespace));
  return objects;
}

interface PodSpec {
  containers: object[];
  volumes: object[];
}

function flanneld(namespace: string): object {
  const probe = (path: string) => ({ httpGet: { host: '127.0.0.1', path, port: FLANNEL_HEALTH_PORT } });
  return {
    name: FLANNEL,
    image: FLANNEL_IMAGE,
    imagePullPolicy: 'IfNotPresent',
    command: ['/usr/bin/flanneld', '--kube-subnet-mgr', '--healthz-ip=127.0.0.1', `--healthz-port=${FLANNEL_HEALTH_PORT}`],
    // The API server's address for host-network pods, when kube-proxy's Service address is not yet usable.
    envFrom: [{ configMapRef: { name: SERVICE_ENDPOINT_CONFIG_MAP, optional: true } }],
    env: [
      { name: 'POD_NAME', valueFrom: { fieldRef: { fieldPath: 'metadata.name' } } },
      { name: 'POD_NAMESPACE', value: namespace },
      { name: 'NODE_NAME', valueFrom: { fieldRef: { fieldPath: 'spec.nodeName' } } },
      fromConfig('FLANNELD_IFACE', 'flannel_iface'),
      fromConfig('FLANNELD_IP_MASQ', 'flannel_masquerade'),
    ],
    // The VXLAN device, routes, neighbours and forwarding database entries, and iptables' rules.
    // No xtables lock: Debian's iptables is the nftables one, which takes none.
    securityContext: { privileged: false, capabilities: { add: ['NET_ADMIN', 'NET_RAW'] } },
    volumeMounts: [
      // /run/flannel/subnet.env: the node's subnet and MTU, for whoever wants them on the host.
      { name: 'flannel-run', mountPath: '/run/flannel' },
      { name: 'flannel-cfg', mountPath: '/etc/kube-flannel', readOnly: true },
    ],
    livenessProbe: { ...probe('/healthz'), periodSeconds: 30, initialDelaySeconds: 10, timeoutSeconds: 10 },
    // Ready once it holds the node's subnet and its VXLAN device is up.
    readinessProbe: { ...probe('/readyz'), periodSeconds: 5, timeoutSeconds: 10 },
    resources: { requests: { cpu: '50m', memory: '50Mi' } },
  };
}

/** What flanneld reads (its pod, the nodes' pod CIDRs and leases) and writes (its node's annotations and NetworkUnavailable condition), as netplug-node's account. */
function flannelRbac(namespace: string): KubeObject[] {
  const name = `${NODE}-flannel`;
  return [
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRole',
      metadata: { name },
      rules: [
        { apiGroups: [''], resources: ['pods'], verbs: ['get'] },
        { apiGroups: [''], resources: ['nodes'], verbs: ['get', 'list', 'watch'] },
        { apiGroups: [''], resources: ['nodes/status'], verbs: ['patch'] },
      ],
    },
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRoleBinding',
      metadata: { name },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name },
      subjects: [{ kind: 'ServiceAccount', name: NODE, namespace }],
    },
  ];
}
