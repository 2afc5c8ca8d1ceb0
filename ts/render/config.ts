// The ConfigMap every component reads its settings from, and (etcd) the Secret with etcd's TLS
// files. Values a cluster operator edits before applying are documented in place.
import { conflistTemplate } from './conflist.ts';
import { CONFIG_MAP, ETCD_SECRET, type KubeObject, type RenderOptions } from './objects.ts';

export function renderConfig(options: RenderOptions): KubeObject[] {
  const etcd = options.datastore === 'etcdv3';
  const data: Record<string, string> = {
    // "0": the plugin uses the MTU netplug-node detects on each node.
    veth_mtu: '0',
    // host-local takes each node's pod CIDR: no pool.
    ...(options.ipam === 'host-local'
      ? {}
      : {
          // "": the cluster's pod CIDR (kubeadm's networking.podSubnet), else 192.168.0.0/16.
          ipv4_pool_cidr: '',
          ipv4_pool_block_size: '26',
          // How the default pool's traffic crosses between nodes: CrossSubnet routes directly
          // between nodes of one subnet and over VXLAN to nodes on others; Always, Never. Set the
          // VXLAN mode to Never to use ipv4_pool_ipip_mode (IP-in-IP, where the kernel has it).
          ipv4_pool_vxlan_mode: 'CrossSubnet',
          ipv4_pool_ipip_mode: 'Never',
        }),
    ...(etcd
      ? {
          // Your etcd cluster, comma-separated. With TLS, set etcd_ca/etcd_cert/etcd_key to
          // /netplug-secrets/etcd-ca, /netplug-secrets/etcd-cert, /netplug-secrets/etcd-key and
          // put the files in the Secret netplug-etcd-secrets.
          etcd_endpoints: 'http://<ETCD_IP>:<ETCD_PORT>',
          // Or, with etcd_endpoints set to "", the DNS domain whose SRV records name your etcd
          // cluster (_etcd-client-ssl._tcp.<domain>, else _etcd-client._tcp.<domain>). Not both:
          // every component refuses the pair.
          etcd_discovery_srv: '',
          etcd_ca: '',
          etcd_cert: '',
          etcd_key: '',
        }
      : {}),
    // "false": the plugin runs as one process per call instead of asking netplug-node; after a
    // change, kubectl rollout restart daemonset/netplug-node.
    [FAST_PATH_KEY]: 'true',
    // Network policy: netplug-node enforces Kubernetes NetworkPolicies and netplug's policy kinds
    // in nftables table `inet netplug` (on etcd, from what netplug-kube-controllers' policy,
    // profile and workloadendpoint controllers write there). "false" removes its rules and the
    // endpoint status files; after a change, kubectl rollout restart daemonset/netplug-node. Turn
    // it off before going back to a release without network policy (docs/upgrade.md): its rules
    // stay in the kernel, and no agent of that release lets new pods through them.
    [POLICY_ENFORCEMENT_KEY]: 'true',
    // Where netplug-node writes endpoint-status/, one file per pod whose policy is programmed.
    // Another path must also be the plugin's endpoint_status_dir (<prefix>/endpoint-status)
    // in cni_network_config and a hostPath volume of DaemonSet netplug-node.
    [ENDPOINT_STATUS_PATH_PREFIX_KEY]: DEFAULT_ENDPOINT_STATUS_PATH_PREFIX,
    // Flow logs: "true" makes netplug-node record the flows its policy decides and send them, every
    // flow_logs_interval seconds, to netplug-flows, which deploy/manifests/netplug-flows.yaml
    // installs (apply it first). After a change, kubectl rollout restart daemonset/netplug-node.
    [FLOW_LOGS_KEY]: 'false',
    [FLOW_LOGS_INTERVAL_KEY]: '15',
    cni_network_config: conflistTemplate(options.datastore, options.ipam),
  };
  const objects: KubeObject[] = [
    { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: CONFIG_MAP, namespace: options.namespace }, data },
  ];
  if (etcd)
    objects.unshift({
      apiVersion: 'v1',
      kind: 'Secret',
      type: 'Opaque',
      metadata: { name: ETCD_SECRET, namespace: options.namespace },
      // base64 of your etcd-ca, etcd-cert and etcd-key files, when etcd uses TLS.
      data: {},
    });
  return objects;
}

/** The ConfigMap key of FAST_PATH, read by netplug-node and install-cni. */
export const FAST_PATH_KEY = 'fast_path';

/** The ConfigMap keys of NETPLUG_POLICY_ENFORCEMENT and NETPLUG_ENDPOINT_STATUS_PATH_PREFIX, read by netplug-node. */
export const POLICY_ENFORCEMENT_KEY = 'policy_enforcement';
export const ENDPOINT_STATUS_PATH_PREFIX_KEY = 'endpoint_status_path_prefix';
/** The ConfigMap keys of NETPLUG_FLOW_LOGS and NETPLUG_FLOW_LOGS_INTERVAL, read by netplug-node. */
export const FLOW_LOGS_KEY = 'flow_logs';
export const FLOW_LOGS_INTERVAL_KEY = 'flow_logs_interval';
/** netplug-node's default, under the host directory of its socket (which the DaemonSet mounts). */
export const DEFAULT_ENDPOINT_STATUS_PATH_PREFIX = '/var/run/netplug';

/** Environment variables from the ConfigMap (`key` → `name`). */
export const fromConfig = (name: string, key: string, optional = false) => ({
  name,
  valueFrom: { configMapKeyRef: { name: CONFIG_MAP, key, ...(optional ? { optional: true } : {}) } },
});

/** The datastore settings every component gets. */
export function datastoreEnv(options: RenderOptions): object[] {
  if (options.datastore === 'kubernetes') return [{ name: 'DATASTORE_TYPE', value: 'kubernetes' }];
  return [
    { name: 'DATASTORE_TYPE', value: 'etcdv3' },
    fromConfig('ETCD_ENDPOINTS', 'etcd_endpoints'),
    // Optional: a ConfigMap from before this key still works.
    fromConfig('ETCD_DISCOVERY_SRV', 'etcd_discovery_srv', true),
    fromConfig('ETCD_CA_CERT_FILE', 'etcd_ca'),
    fromConfig('ETCD_CERT_FILE', 'etcd_cert'),
    fromConfig('ETCD_KEY_FILE', 'etcd_key'),
  ];
}

/** etcd's TLS files, where ETCD_*_FILE point. */
export const etcdSecretVolume = { name: 'etcd-certs', secret: { secretName: ETCD_SECRET, defaultMode: 0o400 } };
export const etcdSecretMount = { name: 'etcd-certs', mountPath: '/netplug-secrets', readOnly: true };
