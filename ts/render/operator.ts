// netplug-operator itself: its namespace, identity and Deployment (release file
// deploy/manifests/netplug-operator.yaml and the helm chart's templates). What it makes from an
// Installation is rendered elsewhere (the node pod, controllers, RBAC of netplug-system).
// Replicas elect a leader on Lease netplug-operator in their namespace (a Role there grants it):
// only the holder reconciles, so a replica still stopping, or one on a node that no longer
// answers, never works beside its successor. The pod is on the host network, where its health
// port is a host port: a second pod cannot start on the same node, hence Recreate. Health and
// metrics on one port: the kubelet's probes, and Prometheus.
import { type KubeObject, labelsOf, STANDARD_NODE_LAYOUT } from './objects.ts';

export const OPERATOR = 'netplug-operator';
export const OPERATOR_NAMESPACE = 'netplug-operator';
export const OPERATOR_GROUP = 'operator.projectnet.org';
/** /livez, /readyz and /metrics. */
export const OPERATOR_HEALTH_PORT = 9095;

type Rule = { apiGroups: string[]; resources: string[]; verbs: string[]; resourceNames?: string[] };
const ALL = ['get', 'list', 'watch', 'create', 'update', 'patch', 'delete'];

/** Everything the operator reads and writes: it applies the objects of netplug-system and grants their roles. */
export const OPERATOR_RULES: Rule[] = [
  {
    apiGroups: [OPERATOR_GROUP],
    resources: ['installations', 'installations/status', 'netplugstatuses', 'netplugstatuses/status'],
    verbs: ALL,
  },
  { apiGroups: [OPERATOR_GROUP], resources: ['installations/finalizers'], verbs: ['update'] },
  // FlowLogAggregator and FlowViewer "default": read, and their status written.
  { apiGroups: [OPERATOR_GROUP], resources: ['flowlogaggregators', 'flowviewers'], verbs: ['get', 'list', 'watch'] },
  { apiGroups: [OPERATOR_GROUP], resources: ['flowlogaggregators/status', 'flowviewers/status'], verbs: ['patch'] },
  {
    apiGroups: ['crd.projectnet.org'],
    resources: ['ippools', 'ipamblocks', 'blockaffinities', 'ipamhandles', 'clusterinformations'],
    verbs: ALL,
  },
  { apiGroups: [''], resources: ['namespaces', 'configmaps', 'serviceaccounts', 'services'], verbs: ALL },
  { apiGroups: [''], resources: ['nodes', 'pods'], verbs: ['get', 'list', 'watch'] },
  { apiGroups: [''], resources: ['events'], verbs: ['create', 'patch'] },
  { apiGroups: ['apps'], resources: ['daemonsets', 'deployments'], verbs: ALL },
  // It grants netplug-system's components their roles, which it must hold or be allowed to bind.
  {
    apiGroups: ['rbac.authorization.k8s.io'],
    resources: ['clusterroles', 'clusterrolebindings', 'roles', 'rolebindings'],
    verbs: [...ALL, 'bind', 'escalate'],
  },
  // netplug-node's installer requests the plugin's token; the operator grants that right.
  { apiGroups: [''], resources: ['serviceaccounts/token'], verbs: ['create'] },
  // netplug-flows reviews its writers' tokens; the operator grants that right.
  { apiGroups: ['authentication.k8s.io'], resources: ['tokenreviews'], verbs: ['create'] },
  { apiGroups: ['apiextensions.k8s.io'], resources: ['customresourcedefinitions'], verbs: ['get', 'list', 'watch'] },
  // The admission policy of the address annotations and its binding: applied, and deleted on clean-up.
  {
    apiGroups: ['admissionregistration.k8s.io'],
    resources: ['validatingadmissionpolicies', 'validatingadmissionpolicybindings'],
    verbs: ['get', 'create', 'update', 'patch', 'delete'],
  },
];

/** In the operator's namespace: its Lease, created by the first replica, then read and renewed by name. */
const OPERATOR_NAMESPACE_RULES: Rule[] = [
  { apiGroups: ['coordination.k8s.io'], resources: ['leases'], verbs: ['create'] },
  { apiGroups: ['coordination.k8s.io'], resources: ['leases'], verbs: ['get', 'update'], resourceNames: [OPERATOR] },
];

export function renderOperator(image: string): KubeObject[] {
  const namespace = OPERATOR_NAMESPACE;
  const probe = (path: string) => ({ httpGet: { path, port: OPERATOR_HEALTH_PORT } });
  return [
    { apiVersion: 'v1', kind: 'Namespace', metadata: { name: namespace, labels: { name: namespace } } },
    { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name: OPERATOR, namespace } },
    { apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'ClusterRole', metadata: { name: OPERATOR }, rules: OPERATOR_RULES },
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRoleBinding',
      metadata: { name: OPERATOR },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: OPERATOR },
      subjects: [{ kind: 'ServiceAccount', name: OPERATOR, namespace }],
    },
    { apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'Role', metadata: { name: OPERATOR, namespace }, rules: OPERATOR_NAMESPACE_RULES },
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'RoleBinding',
      metadata: { name: OPERATOR, namespace },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: OPERATOR },
      subjects: [{ kind: 'ServiceAccount', name: OPERATOR, namespace }],
    },
    {
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      metadata: { name: OPERATOR, namespace, labels: labelsOf(OPERATOR) },
      spec: {
        replicas: 1,
        strategy: { type: 'Recreate' },
        selector: { matchLabels: { name: OPERATOR } },
        template: {
          metadata: {
            labels: { name: OPERATOR, ...labelsOf(OPERATOR) },
            annotations: {
              // For a Prometheus that discovers pods by these (the common kubernetes-pods scrape job).
              'prometheus.io/scrape': 'true',
              'prometheus.io/port': String(OPERATOR_HEALTH_PORT),
              'prometheus.io/path': '/metrics',
            },
          },
          spec: {
            // The operator installs pod networking, so it cannot wait for it.
            hostNetwork: true,
            dnsPolicy: 'ClusterFirstWithHostNet',
            serviceAccountName: OPERATOR,
            nodeSelector: { 'kubernetes.io/os': 'linux' },
            tolerations: [
              { effect: 'NoExecute', operator: 'Exists' },
              { effect: 'NoSchedule', operator: 'Exists' },
            ],
            priorityClassName: 'system-cluster-critical',
            containers: [
              {
                name: OPERATOR,
                image,
                imagePullPolicy: 'IfNotPresent',
                command: ['/usr/bin/netplug-operator'],
                env: [
                  { name: 'NETPLUG_IMAGE', value: image },
                  // The Lease's namespace and this replica's name in it.
                  { name: 'OPERATOR_NAMESPACE', valueFrom: { fieldRef: { fieldPath: 'metadata.namespace' } } },
                  { name: 'POD_NAME', valueFrom: { fieldRef: { fieldPath: 'metadata.name' } } },
                  { name: 'NETPLUG_OPERATOR_HEALTH_ADDR', value: `0.0.0.0:${OPERATOR_HEALTH_PORT}` },
                  // Where netplug keeps its files on the nodes; change only for a non-standard layout.
                  { name: 'NETPLUG_NODE_STATE_DIR', value: STANDARD_NODE_LAYOUT.stateDir },
                  { name: 'NETPLUG_CNI_LOG_FILE', value: STANDARD_NODE_LAYOUT.cniLogFile },
                  { name: 'NETPLUG_AGENT_SOCKET', value: STANDARD_NODE_LAYOUT.agentSocket },
                ],
                envFrom: [{ configMapRef: { name: 'kubernetes-services-endpoint', optional: true } }],
                ports: [{ name: 'metrics', containerPort: OPERATOR_HEALTH_PORT, protocol: 'TCP' }],
                livenessProbe: { ...probe('/livez'), periodSeconds: 10, initialDelaySeconds: 10, failureThreshold: 6, timeoutSeconds: 10 },
                readinessProbe: { ...probe('/readyz'), periodSeconds: 5, timeoutSeconds: 10 },
                resources: { requests: { cpu: '20m', memory: '64Mi' } },
              },
            ],
          },
        },
      },
    },
  ];
}
