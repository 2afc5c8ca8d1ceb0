// Valid inputs the fuzzers start from: netconfs as the README and the tests write them, CNI
// environments, CNI_ARGS, annotations, selectors and datastore documents as netplug stores them.

/** Netconfs (the plugin entries of the README's conflists, and the tests' shapes). */
export const NETCONFS: readonly Record<string, unknown>[] = [
  {
    cniVersion: '1.0.0',
    name: 'pods',
    type: 'netplug',
    etcd_endpoints: 'https://10.0.0.10:2379',
    etcd_ca_cert_file: '/etc/netplug/etcd-ca.pem',
    etcd_cert_file: '/etc/netplug/etcd-client.pem',
    etcd_key_file: '/etc/netplug/etcd-client.key',
    log_file_path: '/var/log/netplug/cni/cni.log',
    ipam: { type: 'netplug-ipam', assign_ipv6: 'true' },
  },
  {
    cniVersion: '1.0.0',
    name: 'k8s-pod-network',
    type: 'netplug',
    etcd_endpoints: 'https://10.0.0.10:2379',
    kubernetes: { kubeconfig: '/etc/cni/net.d/netplug-kubeconfig' },
    policy: { type: 'k8s' },
    ipam: { type: 'netplug-ipam', assign_ipv6: 'true' },
    readiness_gates: ['http://127.0.0.1:9099/readiness'],
    policy_setup_timeout_seconds: 10,
  },
  {
    cniVersion: '1.1.0',
    name: 'netplug-test',
    type: 'netplug',
    ipam: { type: 'host-local', dataDir: '/tmp/x', ranges: [[{ subnet: '10.96.0.0/24' }]], routes: [{ dst: '0.0.0.0/0' }] },
  },
  {
    cniVersion: '0.3.1',
    name: 'legacy',
    type: 'netplug',
    nodename: 'node-a',
    mtu: 1500,
    num_queues: 2,
    etcd_authority: '127.0.0.1:2379',
    etcd_scheme: 'http',
    log_level: 'debug',
    log_file_max_size: 10,
    log_file_max_age: 3,
    log_file_max_count: 2,
    container_settings: { allow_ip_forwarding: true },
    feature_control: { ip_addrs_no_ipam: true, floating_ips: true },
    include_default_routes: true,
    ipam: { type: 'host-local', subnet: 'usePodCidr', rangeStart: '10.0.0.5', rangeEnd: '10.0.0.50', gateway: '10.0.0.1' },
  },
  {
    cniVersion: '0.4.0',
    name: 'k8s-store',
    type: 'netplug',
    datastore_type: 'kubernetes',
    kubernetes: { k8s_api_root: 'https://10.96.0.1:443', node_name: 'node-1' },
    endpoint_status_dir: '/var/run/netplug/endpoint-status',
    readiness_gate_timeout_seconds: 5,
    ipam: { type: 'netplug-ipam', assign_ipv4: 'true', ipv4_pools: ['default', '10.1.0.0/16'], ipv6_pools: ['fd00::/48'] },
    prevResult: { cniVersion: '0.4.0', ips: [{ version: '4', address: '10.0.0.2/24' }] },
  },
  { cniVersion: '1.1.0', name: 'delegated', type: 'netplug', ipam: { type: 'dhcp', routes: [{ dst: '10.0.0.0/8', gw: '10.0.0.1' }] } },
];

/** Every netconf field netplug reads, and the IPAM sections' (added where missing by mutation). */
export const NETCONF_FIELDS: readonly string[] = [
  'cniVersion',
  'name',
  'type',
  'nodename',
  'mtu',
  'num_queues',
  'datastore_type',
  'etcd_endpoints',
  'etcd_discovery_srv',
  'etcd_key_file',
  'etcd_cert_file',
  'etcd_ca_cert_file',
  'etcd_authority',
  'etcd_scheme',
  'ipam',
  'log_level',
  'log_file_path',
  'log_file_max_size',
  'log_file_max_age',
  'log_file_max_count',
  'container_settings',
  'readiness_gates',
  'readiness_gate_timeout_seconds',
  'kubernetes',
  'policy',
  'policy_setup_timeout_seconds',
  'endpoint_status_dir',
  'feature_control',
  'include_default_routes',
  'prevResult',
  'cni.dev/valid-attachments',
  'runtimeConfig',
  'args',
  'assign_ipv4',
  'assign_ipv6',
  'ipv4_pools',
  'ipv6_pools',
  'subnet',
  'ranges',
  'routes',
  'rangeStart',
  'rangeEnd',
  'gateway',
  'dataDir',
  'kubeconfig',
  'k8s_api_root',
  'node_name',
];

export const CNI_VARIABLES = ['CNI_COMMAND', 'CNI_CONTAINERID', 'CNI_NETNS', 'CNI_IFNAME', 'CNI_PATH', 'CNI_ARGS'] as const;

export const ENVIRONMENTS: readonly Record<string, string>[] = [
  {
    CNI_COMMAND: 'ADD',
    CNI_CONTAINERID: 'a4b4c4d4e4f40123456789abcdef0123456789abcdef0123456789abcdef0123',
    CNI_NETNS: '/run/netns/cni-1234',
    CNI_IFNAME: 'eth0',
    CNI_PATH: '/opt/cni/bin:/usr/lib/cni',
    CNI_ARGS: 'IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=web-0;K8S_POD_INFRA_CONTAINER_ID=a4b4;K8S_POD_UID=1-2-3',
  },
  { CNI_COMMAND: 'DEL', CNI_CONTAINERID: 'ctr', CNI_NETNS: '', CNI_IFNAME: 'net1', CNI_PATH: '/opt/cni/bin' },
  {
    CNI_COMMAND: 'CHECK',
    CNI_CONTAINERID: 'c.d-e_f',
    CNI_NETNS: '/proc/1/ns/net',
    CNI_IFNAME: 'eth0',
    CNI_PATH: '/x',
    CNI_ARGS: 'IP=10.0.0.5',
  },
  { CNI_COMMAND: 'GC', CNI_PATH: '/opt/cni/bin' },
  { CNI_COMMAND: 'STATUS', CNI_PATH: '/opt/cni/bin' },
  { CNI_COMMAND: 'VERSION' },
];

export const COMMAND_WORDS = ['ADD', 'DEL', 'CHECK', 'GC', 'STATUS', 'VERSION', 'add', 'Add', 'ADD ', ' ADD', 'ADD\0', 'UPDATE', ''];

export const CNI_ARGS: readonly string[] = [
  'IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=web-0;K8S_POD_INFRA_CONTAINER_ID=abc;K8S_POD_UID=1234',
  'IP=10.0.0.5',
  'IP=fd00::5',
  'K8S_POD_NAMESPACE=kube-system;K8S_POD_NAME=coredns-1',
  'IgnoreUnknown=true;FOO=bar',
  '',
];
export const CNI_ARG_KEYS = ['IgnoreUnknown', 'IP', 'K8S_POD_NAMESPACE', 'K8S_POD_NAME', 'K8S_POD_INFRA_CONTAINER_ID', 'K8S_POD_UID', 'X'];

export const ANNOTATION_VALUES: Record<string, readonly string[]> = {
  'cni.projectnet.org/ipv4pools': ['["default"]', '["10.1.0.0/16","rack-a"]'],
  'cni.projectnet.org/ipv6pools': ['["fd00::/48"]'],
  'cni.projectnet.org/ipAddrs': ['["10.0.0.5"]', '["10.0.0.5","fd00::5"]'],
  'cni.projectnet.org/ipAddrsNoIpam': ['["10.0.0.9"]'],
  'cni.projectnet.org/floatingIPs': ['["192.0.2.1"]', '["192.0.2.1","2001:db8::1"]'],
};

export const SELECTORS: readonly string[] = [
  '',
  'all()',
  'rack == "a"',
  'rack != "a"',
  'has(zone)',
  '!has(zone)',
  'zone in {"a", "b"}',
  'zone not in {"a"}',
  'name contains "x"',
  'name starts with "web"',
  'name ends with "-0"',
  '(rack == "a" || rack == "b") && !has(gpu)',
  "kubernetes.io/os == 'linux'",
];

/** Datastore documents as netplug writes them to etcd (JSON values under their keys). */
export const POOL = {
  kind: 'IPPool',
  apiVersion: 'projectnet.org/v3',
  metadata: { name: 'default', creationTimestamp: '2026-01-01T00:00:00Z' },
  spec: {
    cidr: '10.70.0.0/16',
    blockSize: 26,
    nodeSelector: 'all()',
    ipipMode: 'Never',
    vxlanMode: 'Never',
    natOutgoing: true,
    disabled: false,
  },
};

export const NODE = {
  kind: 'Node',
  apiVersion: 'projectnet.org/v3',
  metadata: { name: 'node-a', creationTimestamp: '2026-01-01T00:00:00Z', labels: { rack: 'a' } },
  spec: {},
};

/** A /30 block of the pool above, one address held. */
export function block(cidr: string, node: string, handle: string): Record<string, unknown> {
  return {
    cidr,
    affinity: `host:${node}`,
    affinityClaimTime: '2026-01-01T00:00:00Z',
    allocations: [0, null, null, null],
    unallocated: [1, 2, 3],
    attributes: [{ handle_id: handle, secondary: { node, timestamp: '2026-01-01T00:00:00Z' } }],
    sequenceNumber: 1,
    deleted: false,
  };
}

export const handle = (id: string, cidr: string) => ({ handleID: id, block: { [cidr]: 1 }, deleted: false });
export const AFFINITY = { state: 'confirmed', deleted: false };
