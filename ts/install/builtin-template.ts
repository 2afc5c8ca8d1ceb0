// The template used when neither the ConfigMap, CNI_NETWORK_CONFIG_FILE nor CNI_NETWORK_CONFIG
// gives one: netplug with netplug-ipam on the Kubernetes datastore, policy k8s, chained portmap
// (the reference's built-in template with netplug names). Empty placeholders drop their fields,
// so the same template serves the etcd datastore when DATASTORE_TYPE and ETCD_* say so.
export const BUILTIN_TEMPLATE = `{
  "name": "k8s-pod-network",
  "cniVersion": "0.3.1",
  "plugins": [
    {
      "type": "netplug",
      "log_level": "__LOG_LEVEL__",
      "log_file_path": "__LOG_FILE_PATH__",
      "datastore_type": "__DATASTORE_TYPE__",
      "nodename": "__KUBERNETES_NODE_NAME__",
      "etcd_endpoints": "__ETCD_ENDPOINTS__",
      "etcd_discovery_srv": "__ETCD_DISCOVERY_SRV__",
      "etcd_key_file": "__ETCD_KEY_FILE__",
      "etcd_cert_file": "__ETCD_CERT_FILE__",
      "etcd_ca_cert_file": "__ETCD_CA_CERT_FILE__",
      "mtu": __CNI_MTU__,
      "ipam": { "type": "netplug-ipam" },
      "policy": { "type": "k8s" },
      "kubernetes": { "kubeconfig": "__KUBECONFIG_FILEPATH__" }
    },
    {
      "type": "portmap",
      "snat": true,
      "capabilities": { "portMappings": true }
    }
  ]
}
`;
