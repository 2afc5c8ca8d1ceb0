// DaemonSet netplug-node: on every node, the node agent (first container) and install-cni (second,
// long-running: it keeps the plugin's token fresh and the conflist equal to the ConfigMap). With
// the fast path (FAST_PATH, default true) the agent serves the plugin's calls on its socket, so it
// sees what the plugin sees on the host at the same paths: the CNI binaries and configuration, the
// log and the node state. Pod network namespaces it gets from the shim, one per call (so it needs
// no mount propagation, which hosts with a private root mount lack). Prometheus scrapes it on
// NODE_METRICS_PORT. With flow logs on (netplug-config's flow_logs; from the operator,
// FlowLogAggregator "default") it sends the flows its policy decides to netplug-flows
// (ts/render/flows.ts), with a token of its service account for that audience.
import { dirname } from 'node:path';

import {
  DEFAULT_ENDPOINT_STATUS_PATH_PREFIX,
  datastoreEnv,
  ENDPOINT_STATUS_PATH_PREFIX_KEY,
  etcdSecretMount,
  etcdSecretVolume,
  FAST_PATH_KEY,
  FLOW_LOGS_INTERVAL_KEY,
  FLOW_LOGS_KEY,
  fromConfig,
  POLICY_ENFORCEMENT_KEY,
} from './config.ts';
import { FLOWS, FLOWS_AUDIENCE, FLOWS_WRITE_PORT } from './flows.ts';
import {
  CONF_NAME,
  CONFIG_HASH_ANNOTATION,
  CONFIG_MAP,
  type KubeObject,
  labelsOf,
  NODE,
  NODE_METRICS_PORT,
  type RenderOptions,
  SERVICE_ENDPOINT_CONFIG_MAP,
  STANDARD_NODE_LAYOUT,
} from './objects.ts';

const NODE_HEALTH_PORT = 9099;

const hostPath = (name: string, path: string) => ({ name, hostPath: { path, type: 'DirectoryOrCreate' } });
const nodeName = (name: string) => ({ name, valueFrom: { fieldRef: { fieldPath: 'spec.nodeName' } } });
const probe = (path: string) => ({ httpGet: { host: '127.0.0.1', path, port: NODE_HEALTH_PORT } });
const serviceEndpoint = [{ configMapRef: { name: SERVICE_ENDPOINT_CONFIG_MAP, optional: true } }];

/** netplug-node's token for netplug-flows: projected, so the kubelet renews it before it expires. */
const FLOWS_TOKEN_DIR = '/var/run/secrets/netplug-flows';
const flowsTokenVolume = {
  name: 'flows-token',
  projected: { sources: [{ serviceAccountToken: { audience: FLOWS_AUDIENCE, expirationSeconds: 3600, path: 'token' } }] },
};
const flowsTokenMount = { name: flowsTokenVolume.name, mountPath: FLOWS_TOKEN_DIR, readOnly: true };
const FLOWS_TOKEN_FILE = `${FLOWS_TOKEN_DIR}/token`;
/** What the kubelet names its Service's cluster IP in the pods of its namespace. */
const FLOWS_SERVICE_HOST = `${FLOWS.toUpperCase().replaceAll('-', '_')}_SERVICE_HOST`;

export function renderNode(options: RenderOptions): KubeObject {
  const etcd = options.datastore === 'etcdv3';
  const { operator } = options;
  const layout = operator?.node ?? STANDARD_NODE_LAYOUT;
  const binDir = operator?.binDir ?? '/opt/cni/bin';
  const confDir = operator?.confDir ?? '/etc/cni/net.d';
  const stateDir = operator?.stateDir ?? STANDARD_NODE_LAYOUT.stateDir;
  // The manifests read it from netplug-config (optional: a ConfigMap from before has none, and the default is on).
  const fastPath = operator ? { name: 'FAST_PATH', value: String(operator.fastPath) } : fromConfig('FAST_PATH', FAST_PATH_KEY, true);
  // The manifests' pool settings come from netplug-config; the operator owns the pools (and has no netplug-config).
  const poolEnv = operator
    ? [{ name: 'NO_DEFAULT_POOLS', value: 'true' }, ...(operator.usePodCidr ? [{ name: 'USE_POD_CIDR', value: 'true' }] : [])]
    : options.ipam === 'host-local'
      ? [{ name: 'USE_POD_CIDR', value: 'true' }]
      : [
          fromConfig('NETPLUG_IPV4POOL_CIDR', 'ipv4_pool_cidr'),
          fromConfig('NETPLUG_IPV4POOL_BLOCK_SIZE', 'ipv4_pool_block_size'),
          // Optional: a netplug-config from before has neither key (the agent's defaults apply).
          fromConfig('NETPLUG_IPV4POOL_VXLAN', 'ipv4_pool_vxlan_mode', true),
          fromConfig('NETPLUG_IPV4POOL_IPIP', 'ipv4_pool_ipip_mode', true),
        ];
  // Network policy (on etcd from what netplug-kube-controllers writes there): from netplug-config
  // (optional: a ConfigMap from before has no key, and the agent's defaults apply), or the
  // Installation's spec.policy.
  const policyEnv = operator
    ? [
        { name: 'NETPLUG_POLICY_ENFORCEMENT', value: String(operator.policyEnforcement) },
        { name: 'NETPLUG_ENDPOINT_STATUS_PATH_PREFIX', value: operator.endpointStatusPathPrefix },
      ]
    : [
        fromConfig('NETPLUG_POLICY_ENFORCEMENT', POLICY_ENFORCEMENT_KEY, true),
        fromConfig('NETPLUG_ENDPOINT_STATUS_PATH_PREFIX', ENDPOINT_STATUS_PATH_PREFIX_KEY, true),
      ];
  // Flow logs: in the manifests on and the interval from netplug-config (optional: a ConfigMap
  // from before has no keys, and they are off); from the operator only with FlowLogAggregator
  // "default", once netplug-flows' Service exists. The aggregator is named by its Service's cluster
  // IP, which the kubelet gives the pods of the Service's namespace as NETPLUG_FLOWS_SERVICE_HOST
  // and expands here, not by its DNS name: on the host network with dnsPolicy ClusterFirst (the
  // default) the pod has the host's resolver, where the name does not resolve;
  // ClusterFirstWithHostNet would resolve it, but would put every name
  // this agent looks up (etcd's endpoints and SRV records, the API server's) behind cluster DNS,
  // whose pods need the network this agent brings up first. The cluster IP is reachable from the
  // host (kube-proxy). It is given to pods started after the Service: apply netplug-flows.yaml, then
  // restart netplug-node (the operator's change of this template restarts them, after the Service);
  // before that the reference stays unexpanded, a URL that reaches nothing, and records are dropped
  // as unreachable (traffic is not affected).
  const flowLogs = !operator || operator.flowLogs !== undefined;
  const flowsTarget = [
    { name: 'NETPLUG_FLOW_LOGS_AGGREGATOR', value: `http://$(${FLOWS_SERVICE_HOST}):${FLOWS_WRITE_PORT}` },
    { name: 'NETPLUG_FLOW_LOGS_TOKEN_FILE', value: FLOWS_TOKEN_FILE },
  ];
  const flowLogsEnv = !operator
    ? [
        fromConfig('NETPLUG_FLOW_LOGS', FLOW_LOGS_KEY, true),
        fromConfig('NETPLUG_FLOW_LOGS_INTERVAL', FLOW_LOGS_INTERVAL_KEY, true),
        ...flowsTarget,
      ]
    : operator.flowLogs
      ? [
          { name: 'NETPLUG_FLOW_LOGS', value: 'true' },
          { name: 'NETPLUG_FLOW_LOGS_INTERVAL', value: String(operator.flowLogs.intervalSeconds) },
          ...flowsTarget,
        ]
      : [];
  // The status files are on the host, where the plugin looks: under the socket's directory by
  // default; elsewhere (the operator's setting) in a volume of their own.
  const statusDir = `${operator?.endpointStatusPathPrefix ?? DEFAULT_ENDPOINT_STATUS_PATH_PREFIX}/endpoint-status`;
  const statusVolume = statusDir.startsWith(`${dirname(layout.agentSocket)}/`) ? [] : [hostPath('endpoint-status', statusDir)];
  const templateEnv = operator
    ? [
        { name: 'NETPLUG_CONFIG_MAP', value: operator.configMap },
        { name: 'NETPLUG_CONFIG_MAP_KEY', value: operator.configKey },
        { name: 'CNI_NETWORK_CONFIG', valueFrom: { configMapKeyRef: { name: operator.configMap, key: operator.configKey } } },
      ]
    : [
        { name: 'NETPLUG_CONFIG_MAP', value: CONFIG_MAP },
        fromConfig('CNI_NETWORK_CONFIG', 'cni_network_config'),
        fromConfig('CNI_MTU', 'veth_mtu'),
      ];
  const agent = {
    name: NODE,
    image: options.image,
    imagePullPolicy: 'IfNotPresent',
    command: ['/usr/bin/netplug-node'],
    envFrom: serviceEndpoint,
    env: [
      ...datastoreEnv(options),
      nodeName('NODENAME'),
      { name: 'CLUSTER_TYPE', value: 'k8s' },
      ...poolEnv,
      ...(options.networking === 'none' ? [{ name: 'NETPLUG_NETWORKING_BACKEND', value: 'none' }] : []),
      { name: 'NETPLUG_HEALTH_ADDR', value: `127.0.0.1:${NODE_HEALTH_PORT}` },
      { name: 'NETPLUG_METRICS_ADDR', value: `:${NODE_METRICS_PORT}` },
      { name: 'NETPLUG_VAR_DIR', value: stateDir },
      fastPath,
      { name: 'NETPLUG_AGENT_SOCKET', value: layout.agentSocket },
      ...policyEnv,
      ...flowLogsEnv,
      // Two malloc arenas, not one per thread: the addon's pooled threads that write netplug's table
      // each kept what they freed in their own (at 5,000 policies ~30 MiB of resident memory).
      { name: 'MALLOC_ARENA_MAX', value: '2' },
      // Its DaemonSet's namespace: when that DaemonSet goes, netplug-node deletes netplug's table as it stops.
      { name: 'POD_NAMESPACE', valueFrom: { fieldRef: { fieldPath: 'metadata.namespace' } } },
    ],
    ports: [{ name: 'metrics', containerPort: NODE_METRICS_PORT, protocol: 'TCP' }],
    // Pod network namespaces, veths and routes: the same rights the plugin has on the host.
    securityContext: { privileged: true },
    // Each at its path on the host: the plugin's calls name host paths (CNI_NETNS, CNI_PATH, netconf files).
    volumeMounts: [
      { name: 'var-lib-netplug', mountPath: stateDir },
      { name: 'var-run-netplug', mountPath: dirname(layout.agentSocket) },
      { name: 'cni-bin-dir', mountPath: binDir, readOnly: true },
      { name: 'cni-net-dir', mountPath: confDir, readOnly: true },
      { name: 'cni-log-dir', mountPath: dirname(layout.cniLogFile) },
      ...statusVolume.map((volume) => ({ name: volume.name, mountPath: statusDir })),
      ...(flowLogs ? [flowsTokenMount] : []),
      ...(etcd ? [etcdSecretMount] : []),
    ],
    livenessProbe: { ...probe('/livez'), periodSeconds: 10, initialDelaySeconds: 10, failureThreshold: 6, timeoutSeconds: 10 },
    readinessProbe: { ...probe('/readyz'), periodSeconds: 5, timeoutSeconds: 10 },
    resources: { requests: { cpu: '50m', memory: '64Mi' } },
  };
  const installer = {
    name: 'install-cni',
    image: options.image,
    imagePullPolicy: 'IfNotPresent',
    command: ['/usr/bin/netplug-install'],
    envFrom: serviceEndpoint,
    env: [
      ...datastoreEnv(options),
      nodeName('KUBERNETES_NODE_NAME'),
      { name: 'CNI_CONF_NAME', value: CONF_NAME },
      { name: 'CNI_NET_DIR', value: operator?.confDir ?? '/etc/cni/net.d' },
      ...templateEnv,
      { name: 'SLEEP', value: 'true' },
      fastPath,
      ...(etcd ? [{ name: 'TLS_ASSETS_DIR', value: '/netplug-secrets' }] : []),
    ],
    volumeMounts: [
      { name: 'cni-bin-dir', mountPath: '/host/opt/cni/bin' },
      { name: 'cni-net-dir', mountPath: '/host/etc/cni/net.d' },
      { name: 'var-lib-netplug', mountPath: '/host/var/lib/netplug' },
      ...(etcd ? [etcdSecretMount] : []),
    ],
    // Ready once this version's install is complete, then no more probing: a readiness probe ran
    // the check (an exec through the runtime) every 5 s on every node for the pod's life. A check
    // still failing after 10 min restarts the container, whose install starts again.
    startupProbe: {
      exec: { command: ['/usr/bin/netplug-install', '--check'] },
      periodSeconds: 1,
      failureThreshold: 600,
      timeoutSeconds: 10,
    },
    resources: { requests: { cpu: '10m', memory: '32Mi' } },
  };
  return {
    apiVersion: 'apps/v1',
    kind: 'DaemonSet',
    metadata: { name: NODE, namespace: options.namespace, labels: labelsOf(NODE) },
    spec: {
      selector: { matchLabels: labelsOf(NODE) },
      updateStrategy: { type: 'RollingUpdate', rollingUpdate: { maxUnavailable: 1 } },
      template: {
        metadata: {
          labels: labelsOf(NODE),
          annotations: {
            // For a Prometheus that discovers pods by these (the common kubernetes-pods scrape job).
            'prometheus.io/scrape': 'true',
            'prometheus.io/port': String(NODE_METRICS_PORT),
            'prometheus.io/path': '/metrics',
            ...(operator ? { [CONFIG_HASH_ANNOTATION]: operator.configHash } : {}),
          },
        },
        spec: {
          hostNetwork: true,
          nodeSelector: { 'kubernetes.io/os': 'linux' },
          // Every node needs pod networking, whatever its taints.
          tolerations: [
            { effect: 'NoSchedule', operator: 'Exists' },
            { key: 'CriticalAddonsOnly', operator: 'Exists' },
            { effect: 'NoExecute', operator: 'Exists' },
          ],
          serviceAccountName: NODE,
          priorityClassName: 'system-node-critical',
          terminationGracePeriodSeconds: 30,
          containers: [agent, installer],
          volumes: [
            hostPath('cni-bin-dir', binDir),
            hostPath('cni-net-dir', confDir),
            hostPath('var-lib-netplug', stateDir),
            hostPath('var-run-netplug', dirname(layout.agentSocket)),
            hostPath('cni-log-dir', dirname(layout.cniLogFile)),
            ...statusVolume,
            ...(flowLogs ? [flowsTokenVolume] : []),
            ...(etcd ? [etcdSecretVolume] : []),
          ],
        },
      },
    },
  };
}
