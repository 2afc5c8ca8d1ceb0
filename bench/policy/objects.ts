// The Kubernetes objects bench/policy.ts fills the datastore with: its namespaces, the Pod objects of
// every node, the NetworkPolicies of the compiler bench's shapes, and the ADD namespace's policies.
import type * as k8s from '@kubernetes/client-node';

import { APPS, NAMESPACES, NODES, ON } from './settings.ts';

export const namespaceName = (n: number) => `bns${n}`;

/** Pod `i` of the datastore: one in NODES on the enforcing node, the rest spread over the others. */
export function remotePod(i: number): { namespace: string; body: k8s.V1Pod & { metadata: { name: string } }; address: string } {
  const node = i % NODES === 0 ? ON : `bench-node-${i % NODES}`;
  return {
    namespace: namespaceName(i % NAMESPACES),
    address: `10.200.${i >> 8}.${i & 255}`,
    body: {
      metadata: { name: `pod${i}`, labels: { app: `app${i % APPS}`, ...(i % 7 === 0 ? { role: 'db' } : {}) } },
      spec: { nodeName: node, containers: [{ name: 'main', image: 'busybox', ports: [{ name: 'http', containerPort: 8080 }] }] },
    },
  };
}

/** Kubernetes NetworkPolicies of the compiler bench's shapes; every one allows from role=db in any namespace (one shared set). */
export function clusterPolicy(i: number): { namespace: string; body: Record<string, unknown> } {
  return {
    namespace: namespaceName(i % NAMESPACES),
    body: {
      apiVersion: 'networking.k8s.io/v1',
      kind: 'NetworkPolicy',
      metadata: { name: `np${i}` },
      spec: {
        podSelector: { matchLabels: { app: `app${i % APPS}` } },
        policyTypes: i % 2 === 0 ? ['Ingress', 'Egress'] : ['Ingress'],
        ingress: [
          {
            from: [
              { podSelector: { matchLabels: { app: `app${(i + 1) % APPS}` } } },
              { namespaceSelector: { matchLabels: { team: `t${i % 5}` } } },
              { namespaceSelector: {}, podSelector: { matchLabels: { role: 'db' } } },
            ],
            ports: [{ port: 80 }, { port: 443 }, { port: 'http' }],
          },
        ],
        ...(i % 2 === 0 ? { egress: [{ to: [{ ipBlock: { cidr: '10.0.0.0/8', except: [`10.${i % 200}.0.0/16`] } }] }] } : {}),
      },
    },
  };
}

/** The ADD's namespace: a default-deny ingress policy and 50 others, half of them selecting the ADD's pods. */
export function addNamespacePolicies(): k8s.V1NetworkPolicy[] {
  return [
    { metadata: { name: 'default-deny' }, spec: { podSelector: {}, policyTypes: ['Ingress'] } },
    ...Array.from(
      { length: 50 },
      (_, k): k8s.V1NetworkPolicy => ({
        metadata: { name: `add-np${k}` },
        spec: {
          podSelector: { matchLabels: { app: k % 2 === 0 ? 'web' : `other${k}` } },
          ingress: [{ _from: [{ podSelector: { matchLabels: { app: `client${k}` } } }], ports: [{ port: 8000 + k }] }],
        },
      }),
    ),
  ];
}
