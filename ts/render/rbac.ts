// Least-privilege identities: one ServiceAccount per component, each bound to what that component
// does and nothing more. The CNI plugin's rules are deploy/rbac/netplug-cni.yaml's; netplug-node is
// bound to them too, as it serves the plugin's calls (the fast path). That adds no right: its
// install-cni already requests the plugin's tokens.
import { CNI_PLUGIN, CONFIG_MAP, CONTROLLERS, type KubeObject, NODE, type RenderOptions } from './objects.ts';

type Rule = { apiGroups: string[]; resources: string[]; verbs: string[]; resourceNames?: string[] };

const CRD_GROUP = 'crd.projectnet.org';
/** netplug's policy kinds (projectnet.org/v3). */
const POLICY_GROUP = 'projectnet.org';

/**
 * What netplug-node's policy subsystem watches (ts/node/policy/follow-resources.ts, whose
 * POLICY_WATCH_RULES a test holds these equal to): granted whether or not enforcement is on, so
 * that turning it on in netplug-config needs no change of roles.
 */
const NODE_POLICY_RULES: Rule[] = [
  { apiGroups: [''], resources: ['namespaces', 'serviceaccounts'], verbs: ['list', 'watch'] },
  // A pod an ADD is served for is read when the watch has not heard of it yet.
  { apiGroups: [''], resources: ['pods'], verbs: ['get', 'list', 'watch'] },
  { apiGroups: ['networking.k8s.io'], resources: ['networkpolicies'], verbs: ['list', 'watch'] },
  {
    apiGroups: [POLICY_GROUP],
    resources: ['networkpolicies', 'globalnetworkpolicies', 'networksets', 'globalnetworksets', 'tiers'],
    verbs: ['list', 'watch'],
  },
  // Host endpoints: this node's are programmed, every one's addresses are peers.
  { apiGroups: [CRD_GROUP], resources: ['hostendpoints'], verbs: ['list', 'watch'] },
];
const IPAM_KINDS = ['ipamblocks', 'blockaffinities', 'ipamhandles', 'ipampendingrequests', 'workloadendpoints'];

/** Cluster-wide rules of each component on the given datastore. */
function clusterRules(component: string, datastore: RenderOptions['datastore']): Rule[] {
  const kdd = datastore === 'kubernetes';
  switch (component) {
    case NODE:
      return [
        // Its own Node (by field selector; on etcd its labels go to the datastore's Node), and every
        // other node's addresses for the routes to their pods.
        { apiGroups: [''], resources: ['nodes'], verbs: ['get', 'list', 'watch'] },
        // The pods of its node (by field selector) and the namespaces, watched so that the ADDs it
        // serves need not read them (ts/node/cni/watch-pods.ts).
        { apiGroups: [''], resources: ['pods', 'namespaces'], verbs: ['list', 'watch'] },
        ...(kdd
          ? [
              // The default pool on first start; ClusterInformation at every start.
              { apiGroups: [CRD_GROUP], resources: ['ippools'], verbs: ['list', 'create'] },
              { apiGroups: [CRD_GROUP], resources: ['clusterinformations'], verbs: ['get', 'create', 'update'] },
              // Its addresses for other nodes' routes (ts/node/addresses/publish-addresses.ts) and its
              // release (ts/node/startup/record-version.ts), as annotations on its Node.
              { apiGroups: [''], resources: ['nodes'], verbs: ['patch'] },
              // The pools and blocks its routes follow (ts/node/shared/cluster-feed.ts); listing them is the plugin's right.
              { apiGroups: [CRD_GROUP], resources: ['ippools', 'ipamblocks'], verbs: ['watch'] },
              // Network policy (enforced on the Kubernetes datastore only).
              ...NODE_POLICY_RULES,
            ]
          : []),
        // Events on the policies it cannot program (ts/node/policy/report-issues.ts): a repeat is
        // counted on the event written before, read first when the agent restarted (ts/runtime/events.ts).
        { apiGroups: [''], resources: ['events'], verbs: ['get', 'create', 'patch'] },
      ];
    case CONTROLLERS:
      return [
        { apiGroups: [''], resources: ['nodes', 'pods'], verbs: ['get', 'list', 'watch'] },
        ...(kdd
          ? []
          : [
              // The policy and profile controllers (etcd only): Kubernetes' NetworkPolicies, Namespaces and
              // ServiceAccounts, copied into etcd; read again before what they made is removed.
              { apiGroups: [''], resources: ['namespaces', 'serviceaccounts'], verbs: ['get', 'list', 'watch'] },
              { apiGroups: ['networking.k8s.io'], resources: ['networkpolicies'], verbs: ['get', 'list', 'watch'] },
            ]),
        ...(kdd
          ? [
              // Releases of leaked addresses and of deleted nodes' blocks; never creates IPAM state.
              { apiGroups: [CRD_GROUP], resources: ['ipamblocks'], verbs: ['get', 'list', 'update', 'delete'] },
              { apiGroups: [CRD_GROUP], resources: ['ipamhandles'], verbs: ['get', 'update', 'delete'] },
              { apiGroups: [CRD_GROUP], resources: ['blockaffinities', 'ipampendingrequests'], verbs: ['list', 'delete'] },
              { apiGroups: [CRD_GROUP], resources: ['workloadendpoints'], verbs: ['get', 'delete'] },
              { apiGroups: [CRD_GROUP], resources: ['ippools'], verbs: ['list'] },
              // Automatic host endpoints; their configuration, created when absent, with status.runningConfig;
              // both watched, so that a change is reconciled at once.
              { apiGroups: [CRD_GROUP], resources: ['hostendpoints'], verbs: ['list', 'watch', 'create', 'update', 'delete'] },
              { apiGroups: [CRD_GROUP], resources: ['kubecontrollersconfigurations'], verbs: ['get', 'list', 'watch', 'create', 'update'] },
              // The cluster's version brought to the lowest the remaining nodes record once a node is deleted (ts/controllers/node-controller.ts).
              { apiGroups: [CRD_GROUP], resources: ['clusterinformations'], verbs: ['get', 'update'], resourceNames: ['default'] },
            ]
          : []),
      ];
    case CNI_PLUGIN:
      return [
        { apiGroups: [''], resources: ['pods', 'namespaces', 'nodes'], verbs: ['get'] },
        ...(kdd
          ? [
              { apiGroups: [CRD_GROUP], resources: ['ippools'], verbs: ['get', 'list'] },
              { apiGroups: [CRD_GROUP], resources: IPAM_KINDS, verbs: ['get', 'list', 'create', 'update', 'delete'] },
              // Whether a datastore migration has it locked (ADD is refused meanwhile).
              { apiGroups: [CRD_GROUP], resources: ['clusterinformations'], verbs: ['get'], resourceNames: ['default'] },
            ]
          : []),
      ];
    default:
      throw new Error(`no rules for ${component}`);
  }
}

/** Rules in the install namespace: install-cni (same pod, same identity as netplug-node); the controllers' Lease. */
function namespaceRules(component: string, options: RenderOptions): Rule[] {
  if (component === CONTROLLERS)
    return [
      // Leader election: the Lease is created by the first replica, then read and renewed by name.
      { apiGroups: ['coordination.k8s.io'], resources: ['leases'], verbs: ['create'] },
      { apiGroups: ['coordination.k8s.io'], resources: ['leases'], verbs: ['get', 'update'], resourceNames: [CONTROLLERS] },
    ];
  if (component !== NODE) return [];
  const configMap = options.operator?.configMap ?? CONFIG_MAP;
  return [
    // The plugin's kubeconfig token, for netplug-cni-plugin only.
    { apiGroups: [''], resources: ['serviceaccounts/token'], verbs: ['create'], resourceNames: [CNI_PLUGIN] },
    // The conflist template (watched) and kubeadm's pod subnet for the default pool.
    { apiGroups: [''], resources: ['configmaps'], verbs: ['get', 'list', 'watch'], resourceNames: [configMap] },
    { apiGroups: [''], resources: ['configmaps'], verbs: ['get'], resourceNames: ['kubeadm-config'] },
    // Whether the DaemonSet is being deleted (then install-cni removes what it installed).
    { apiGroups: ['apps'], resources: ['daemonsets'], verbs: ['get'], resourceNames: [NODE] },
  ];
}

export function renderRbac(options: RenderOptions): KubeObject[] {
  const objects: KubeObject[] = [];
  for (const component of [NODE, CNI_PLUGIN, CONTROLLERS]) {
    const subject = { kind: 'ServiceAccount', name: component, namespace: options.namespace };
    objects.push({ apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name: component, namespace: options.namespace } });
    objects.push({
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRole',
      metadata: { name: component },
      rules: clusterRules(component, options.datastore),
    });
    // netplug-node serves the plugin's calls on the fast path, with the plugin's rights.
    const nodeAgent = { kind: 'ServiceAccount', name: NODE, namespace: options.namespace };
    objects.push({
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRoleBinding',
      metadata: { name: component },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: component },
      subjects: component === CNI_PLUGIN ? [subject, nodeAgent] : [subject],
    });
    const rules = namespaceRules(component, options);
    if (rules.length === 0) continue;
    objects.push({
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'Role',
      metadata: { name: component, namespace: options.namespace },
      rules,
    });
    objects.push({
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'RoleBinding',
      metadata: { name: component, namespace: options.namespace },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: component },
      subjects: [subject],
    });
  }
  return objects;
}
