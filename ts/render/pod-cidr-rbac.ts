// With USE_POD_CIDR=true (host-local installs) netplug-node follows its own Node's spec.podCIDRs
// (list by field selector, then watch), which on the Kubernetes datastore its ClusterRole does not
// otherwise allow. A role of its own, so that an install on netplug-ipam grants nothing of it. The
// operator always renders it, without rules unless HostLocal: switching the IPAM type back then
// updates it in place instead of leaving a role behind.
import { type KubeObject, NODE, type RenderOptions } from './objects.ts';

const POD_CIDR_ROLE = `${NODE}-pod-cidrs`;

export function renderPodCidrRbac(options: RenderOptions, usePodCidr: boolean): KubeObject[] {
  return [
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRole',
      metadata: { name: POD_CIDR_ROLE },
      rules: usePodCidr ? [{ apiGroups: [''], resources: ['nodes'], verbs: ['list', 'watch'] }] : [],
    },
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRoleBinding',
      metadata: { name: POD_CIDR_ROLE },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: POD_CIDR_ROLE },
      subjects: [{ kind: 'ServiceAccount', name: NODE, namespace: options.namespace }],
    },
  ];
}
