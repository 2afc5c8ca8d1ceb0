// The conflist template install-cni renders on each node (ConfigMap key cni_network_config). The
// placeholders are install-cni's (placeholder-values.ts): `mtu` is written unquoted, as the
// reference's templates do, and dropped when 0 (auto: the plugin reads the node agent's MTU file).
import type { Datastore, RenderOptions } from './objects.ts';

export function conflistTemplate(datastore: Datastore, ipam: RenderOptions['ipam'] = 'netplug-ipam'): string {
  const datastoreFields =
    datastore === 'kubernetes'
      ? ['"datastore_type": "kubernetes"', '"endpoint_status_dir": "/var/run/netplug/endpoint-status"']
      : [
          '"datastore_type": "etcdv3"',
          '"etcd_endpoints": "__ETCD_ENDPOINTS__"',
          '"etcd_discovery_srv": "__ETCD_DISCOVERY_SRV__"',
          '"etcd_key_file": "__ETCD_KEY_FILE__"',
          '"etcd_cert_file": "__ETCD_CERT_FILE__"',
          '"etcd_ca_cert_file": "__ETCD_CA_CERT_FILE__"',
        ];
  const netplug = [
    '"type": "netplug"',
    ...datastoreFields,
    '"log_level": "__LOG_LEVEL__"',
    '"log_file_path": "/var/log/netplug/cni/cni.log"',
    '"nodename": "__KUBERNETES_NODE_NAME__"',
    '"mtu": __CNI_MTU__',
    ipam === 'host-local' ? '"ipam": {"type": "host-local", "subnet": "usePodCidr"}' : '"ipam": {"type": "netplug-ipam"}',
    '"policy": {"type": "k8s"}',
    '"kubernetes": {"kubeconfig": "__KUBECONFIG_FILEPATH__"}',
  ];
  return `{
  "name": "k8s-pod-network",
  "cniVersion": "1.0.0",
  "plugins": [
    {
${netplug.map((line) => `      ${line}`).join(',\n')}
    },
    {"type": "portmap", "snat": true, "capabilities": {"portMappings": true}}
  ]
}
`;
}
