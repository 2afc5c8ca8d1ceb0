// netplug-operator itself: its namespace, identity and Deployment (release file
// deploy/manifests/netplug-operator.yaml and the helm chart's templates). What it makes from an
// Installation is rendered elsewhere (the node pod, controllers, RBAC of netplug-system).
import { type KubeObject, labelsOf, STANDARD_NODE_LAYOUT } from './objects.ts';

export const OPERATOR = 'netplug-operator';
export const OPERATOR_NAMESPACE = 'netplug-operator';
export const OPERATOR_GROUP = 'operator.projectnet.org';

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
  { apiGroups: ['apiextensions.k8s.io'], resources: ['customresourcedefinitions'], verbs: ['get', 'list', 'watch'] },
  { apiGroups: ['coordination.k8s.io'], resources: ['leases'], verbs: ALL },
];

export function renderOperator(image: string): KubeObject[] {
  const namespace = OPERATOR_NAMESPACE;
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
    {
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      metadata: { name: OPERATOR, namespace, labels: labelsOf(OPERATOR) },
      spec: {
        replicas: 1,
        strategy: { type: 'Recreate' },
        selector: { matchLabels: { name: OPERATOR } },
        template: {
          metadata: { labels: { name: OPERATOR, ...labelsOf(OPERATOR) } },
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
                  { name: 'OPERATOR_NAMESPACE', valueFrom: { fieldRef: { fieldPath: 'metadata.namespace' } } },
                  // Where netplug keeps its files on the nodes; change only for a non-standard layout.
                  { name: 'NETPLUG_NODE_STATE_DIR', value: STANDARD_NODE_LAYOUT.stateDir },
                  { name: 'NETPLUG_CNI_LOG_FILE', value: STANDARD_NODE_LAYOUT.cniLogFile },
                  { name: 'NETPLUG_AGENT_SOCKET', value: STANDARD_NODE_LAYOUT.agentSocket },
                  { name: 'NETPLUG_NETNS_DIR', value: STANDARD_NODE_LAYOUT.netnsDir },
                ],
                envFrom: [{ configMapRef: { name: 'kubernetes-services-endpoint', optional: true } }],
                resources: { requests: { cpu: '20m', memory: '64Mi' } },
              },
            ],
          },
        },
      },
    },
  ];
}
