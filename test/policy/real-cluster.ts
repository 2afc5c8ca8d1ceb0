// The test cluster of cluster.ts made real, for the truth-table suite: one node running
// netplug-node with enforcement on (test/node/policy-node.ts), namespaces x, y, z with their
// labels and service accounts, the tiers and network sets of the generated worlds, and pods a, b, c
// in each as network namespaces plugged into the node with the model's addresses, each with a
// Pod object (labels, service account, named ports, podIPs) and one process serving TCP and UDP
// on 80 and 81 and probing others (pod-process.ts). A world's policies go in and out through the
// API; `settled` tells when the agent has programmed exactly what a local compiler makes of them.
import type * as k8s from '@kubernetes/client-node';

import { hostInterfaceName } from '../../ts/dataplane/index.ts';
import type { NetworkPolicyResource, NetworkSetResource, TierResource } from '../../ts/model/policy.ts';
import type { KubeNetworkPolicy } from '../../ts/policy/kubernetes.ts';
import { POLICY_GROUP } from '../../ts/store/kubernetes/resources.ts';
import type { Teardowns } from '../helpers/shared.ts';
import { HEALTH_ADDR, createRunningPod, plugNetns, startPolicyNode, type PolicyNode } from '../node/policy-node.ts';
import { PORTS, testCluster, type TestCluster } from './cluster.ts';
import { TEST_NETWORK_SETS, TEST_TIERS } from './generate.ts';
import { engineFor } from './harness.ts';
import type { PolicyWorld } from './model.ts';
import { NetnsProcess } from './probe.ts';

const INTERFACE_PREFIX = 'cali';

const PLURALS: Record<string, string> = {
  NetworkPolicy: 'networkpolicies',
  GlobalNetworkPolicy: 'globalnetworkpolicies',
  NetworkSet: 'networksets',
  GlobalNetworkSet: 'globalnetworksets',
  Tier: 'tiers',
};

export interface AgentCounts {
  policies: number;
  rules: number;
  endpoints: number;
}

export interface RealCluster {
  policyNode: PolicyNode;
  /** The pods as the model and the compiler see them (all on the one node, with its interface names). */
  cluster: TestCluster;
  /** Each pod's process, by `<namespace>/<name>`. */
  processes: Map<string, NetnsProcess>;
  /** The agent's programmed policies, rules and endpoints (its metrics). */
  counts(): Promise<AgentCounts | undefined>;
  /** What a compiler fed `world` on this node programs: the agent's counts once it holds the world. */
  expectedCounts(world: PolicyWorld): AgentCounts;
  /** The world's policies created through the API. */
  apply(world: PolicyWorld): Promise<void>;
  /** The world's policies deleted. */
  remove(world: PolicyWorld): Promise<void>;
}

/** A world over this cluster: the generated policies, the fixture's pods, tiers and network sets (always there). */
export function onCluster(world: PolicyWorld, cluster: TestCluster): PolicyWorld {
  return { ...world, cluster, networkSets: TEST_NETWORK_SETS, tiers: TEST_TIERS };
}

/** The fixture without policies. */
export const noPolicies = (cluster: TestCluster): PolicyWorld =>
  onCluster({ cluster, kubernetesPolicies: [], policies: [], networkSets: [], tiers: [] }, cluster);

/** A netplug resource as the API takes it (its own namespace only in metadata). */
async function createNetplug(custom: k8s.CustomObjectsApi, resource: NetworkPolicyResource | NetworkSetResource | TierResource) {
  const plural = PLURALS[resource.kind] as string;
  const namespace = 'namespace' in resource.metadata ? resource.metadata.namespace : undefined;
  if (namespace) await custom.createNamespacedCustomObject({ group: POLICY_GROUP, version: 'v3', namespace, plural, body: resource });
  else await custom.createClusterCustomObject({ group: POLICY_GROUP, version: 'v3', plural, body: resource });
}

async function deleteNetplug(custom: k8s.CustomObjectsApi, resource: NetworkPolicyResource) {
  const plural = PLURALS[resource.kind] as string;
  const { name, namespace } = resource.metadata;
  if (namespace) await custom.deleteNamespacedCustomObject({ group: POLICY_GROUP, version: 'v3', namespace, plural, name });
  else await custom.deleteClusterCustomObject({ group: POLICY_GROUP, version: 'v3', plural, name });
}

// Kubernetes NetworkPolicies go through the generic client: client-node's typed one knows an
// ingress rule's peers as `_from` and would drop `from` (opening the rule to everyone).
const knp = (namespace: string) => ({ group: 'networking.k8s.io', version: 'v1', namespace, plural: 'networkpolicies' });

export async function startRealCluster(shared: Teardowns): Promise<RealCluster> {
  const policyNode = await startPolicyNode(shared);
  const { kube, node } = policyNode;
  const base = testCluster(() => node.name);
  const cluster: TestCluster = {
    ...base,
    pods: base.pods.map((pod) => ({ ...pod, interfaceName: hostInterfaceName(INTERFACE_PREFIX, `${pod.namespace}.${pod.name}`) })),
  };
  for (const namespace of cluster.namespaces) {
    // The API server adds kubernetes.io/metadata.name itself.
    const { 'kubernetes.io/metadata.name': _, ...labels } = namespace.labels;
    await kube.core.createNamespace({ body: { metadata: { name: namespace.name, labels } } });
    shared.teardown(() => kube.core.deleteNamespace({ name: namespace.name }).catch(() => undefined));
  }
  for (const account of cluster.serviceAccounts)
    await kube.core.createNamespacedServiceAccount({
      namespace: account.namespace,
      body: { metadata: { name: account.name, labels: account.labels } },
    });
  for (const resource of [...TEST_TIERS, ...TEST_NETWORK_SETS]) await createNetplug(kube.custom, resource);
  const processes = new Map<string, NetnsProcess>();
  for (const pod of cluster.pods) {
    const netns = plugNetns(shared, node, `nptt-${pod.namespace}${pod.name}-${process.pid}`, pod.ipv4, pod.interfaceName);
    await createRunningPod(kube, {
      namespace: pod.namespace,
      name: pod.name,
      labels: pod.labels,
      nodeName: node.name,
      addresses: [pod.ipv4, pod.ipv6],
      serviceAccount: pod.serviceAccount,
      ports: pod.ports.map((port) => ({ name: port.name, containerPort: port.port, protocol: port.protocol })),
    });
    processes.set(pod.key, new NetnsProcess(shared, netns, PORTS));
  }
  await Promise.all([...processes.values()].map((each) => each.ready));
  // Reads the agent's metrics from inside the node, where its health server listens.
  const nodeProcess = new NetnsProcess(shared, node.netns);
  await nodeProcess.ready;

  const metric = (text: string, name: string) => {
    const found = new RegExp(`^${name} (\\d+)$`, 'm').exec(text)?.[1];
    return found === undefined ? undefined : Number(found);
  };
  return {
    policyNode,
    cluster,
    processes,
    async counts() {
      const { status, text } = await nodeProcess.fetch(`http://${HEALTH_ADDR}/metrics`);
      if (status !== 200) return undefined;
      const [policies, rules, endpoints] = ['policies', 'rules', 'endpoints'].map((what) =>
        metric(text, `netplug_policy_${what}_programmed`),
      );
      if (policies === undefined || rules === undefined || endpoints === undefined) return undefined;
      return { policies, rules, endpoints };
    },
    expectedCounts(world) {
      const stats = engineFor(world, node.name, { interfacePrefix: INTERFACE_PREFIX }).engine.stats();
      return { policies: stats.activePolicies, rules: stats.policyRules, endpoints: stats.localEndpoints };
    },
    async apply(world) {
      await Promise.all([
        ...world.kubernetesPolicies.map((policy: KubeNetworkPolicy) =>
          kube.custom.createNamespacedCustomObject({
            ...knp(policy.metadata.namespace ?? 'default'),
            body: { apiVersion: 'networking.k8s.io/v1', kind: 'NetworkPolicy', ...policy },
          }),
        ),
        ...world.policies.map((policy) => createNetplug(kube.custom, policy)),
      ]);
    },
    async remove(world) {
      // One that did not get in (a failed apply) is not there to delete.
      const gone = (err: unknown) => {
        if ((err as { code?: number }).code !== 404) throw err;
      };
      await Promise.all([
        ...world.kubernetesPolicies.map((policy) =>
          kube.custom
            .deleteNamespacedCustomObject({ ...knp(policy.metadata.namespace ?? 'default'), name: policy.metadata.name })
            .catch(gone),
        ),
        ...world.policies.map((policy) => deleteNetplug(kube.custom, policy).catch(gone)),
      ]);
    },
  };
}
