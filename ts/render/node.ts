// DaemonSet netplug-node: on every node, the node agent (first container) and install-cni (second,
// long-running: it keeps the plugin's token fresh and the conflist equal to the ConfigMap).
import { datastoreEnv, etcdSecretMount, etcdSecretVolume, fromConfig } from './config.ts';
import {
  CONF_NAME,
  CONFIG_HASH_ANNOTATION,
  CONFIG_MAP,
  type KubeObject,
  labelsOf,
  NODE,
  type RenderOptions,
  SERVICE_ENDPOINT_CONFIG_MAP,
} from './objects.ts';

export const NODE_HEALTH_PORT = 9099;

const hostPath = (name: string, path: string) => ({ name, hostPath: { path, type: 'DirectoryOrCreate' } });
const nodeName = (name: string) => ({ name, valueFrom: { fieldRef: { fieldPath: 'spec.nodeName' } } });
const probe = (path: string) => ({ httpGet: { host: '127.0.0.1', path, port: NODE_HEALTH_PORT } });
const serviceEndpoint = [{ configMapRef: { name: SERVICE_ENDPOINT_CONFIG_MAP, optional: true } }];

export function renderNode(options: RenderOptions): KubeObject {
  const etcd = options.datastore === 'etcdv3';
  const { operator } = options;
  // The manifests' pool settings come from netplug-config; the operator owns the pools (and has no netplug-config).
  const poolEnv = operator
    ? [{ name: 'NO_DEFAULT_POOLS', value: 'true' }, ...(operator.usePodCidr ? [{ name: 'USE_POD_CIDR', value: 'true' }] : [])]
    : options.ipam === 'host-local'
      ? [{ name: 'USE_POD_CIDR', value: 'true' }]
      : [fromConfig('NETPLUG_IPV4POOL_CIDR', 'ipv4_pool_cidr'), fromConfig('NETPLUG_IPV4POOL_BLOCK_SIZE', 'ipv4_pool_block_size')];
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
      { name: 'NETPLUG_HEALTH_ADDR', value: `127.0.0.1:${NODE_HEALTH_PORT}` },
    ],
    volumeMounts: [{ name: 'var-lib-netplug', mountPath: '/var/lib/netplug' }, ...(etcd ? [etcdSecretMount] : [])],
    livenessProbe: { ...probe('/liveness'), periodSeconds: 10, initialDelaySeconds: 10, failureThreshold: 6, timeoutSeconds: 10 },
    readinessProbe: { ...probe('/readiness'), periodSeconds: 5, timeoutSeconds: 10 },
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
      ...(etcd ? [{ name: 'TLS_ASSETS_DIR', value: '/netplug-secrets' }] : []),
    ],
    volumeMounts: [
      { name: 'cni-bin-dir', mountPath: '/host/opt/cni/bin' },
      { name: 'cni-net-dir', mountPath: '/host/etc/cni/net.d' },
      { name: 'var-lib-netplug', mountPath: '/host/var/lib/netplug' },
      ...(etcd ? [etcdSecretMount] : []),
    ],
    readinessProbe: { exec: { command: ['/usr/bin/netplug-install', '--check'] }, periodSeconds: 5, timeoutSeconds: 10 },
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
          ...(operator ? { annotations: { [CONFIG_HASH_ANNOTATION]: operator.configHash } } : {}),
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
            hostPath('cni-bin-dir', operator?.binDir ?? '/opt/cni/bin'),
            hostPath('cni-net-dir', operator?.confDir ?? '/etc/cni/net.d'),
            hostPath('var-lib-netplug', operator?.stateDir ?? '/var/lib/netplug'),
            ...(etcd ? [etcdSecretVolume] : []),
          ],
        },
      },
    },
  };
}
