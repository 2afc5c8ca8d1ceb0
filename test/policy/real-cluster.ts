// The test cluster of cluster.ts made real, for the truth-table suites, on either datastore: one
// node running netplug-node with enforcement on (test/node/policy-node.ts), namespaces x, y, z with
// their labels and service accounts, the tiers and network sets of the generated worlds, and pods
// a, b, c in each as network namespaces plugged into the node with the model's addresses, each with
// a Pod object (labels, service account, named ports, podIPs) and one process serving TCP and UDP
// on 80 and 81 and probing others (pod-process.ts).
//
// On etcd, netplug-kube-controllers run (policy, profile and workloadendpoint): namespaces and
// service accounts reach the agent as their profiles, Kubernetes NetworkPolicies as the
// controllers' knp.default.* documents; each pod's workload endpoint is written as the plugin's ADD
// writes it, with no labels of the pod's (as if labelled after it started), and gets them from the
// workloadendpoint controller; netplug's resources are written with netplugctl (world-writes.ts).
//
// A world's policies go in and out as world-writes.ts says; `counts` and `expectedCounts` tell when
// the agent has programmed exactly what a local compiler makes of them.
import { randomBytes } from 'node:crypto';

import { hostInterfaceName } from '../../ts/dataplane/index.ts';
import { keys } from '../../ts/model/keys.ts';
import { namespaceProfileName, serviceAccountProfileName } from '../../ts/model/policy.ts';
import { workloadEndpoint, workloadEndpointName, type WorkloadEndpoint } from '../../ts/model/workload-endpoint.ts';
import { hostNetwork, macFor } from '../../ts/plugin/endpoint.ts';
import { openStore } from '../../ts/store/open.ts';
import type { Store } from '../../ts/store/store.ts';
import { tempDir } from '../helpers/cni.ts';
import { eventually } from '../helpers/eventually.ts';
import type { Teardowns } from '../helpers/shared.ts';
import { CONTROLLER_ETCD_RULES, CONTROLLER_RULES, controllersIdentity, startControllers } from '../controllers/fixtures.ts';
import { HEALTH_ADDR, createRunningPod, plugNetns, startPolicyNode } from '../node/policy-node.ts';
import { PORTS, testCluster, type TestCluster, type TestPod } from './cluster.ts';
import { TEST_NETWORK_SETS, TEST_TIERS } from './generate.ts';
import { engineFor } from './harness.ts';
import type { PolicyWorld } from './model.ts';
import { NetnsProcess } from './probe.ts';
import { netplugThroughApi, netplugThroughCtl, worldWrites, type NetplugWrites, type WorldWrites } from './world-writes.ts';

export const INTERFACE_PREFIX = 'cali';

export type Datastore = 'kubernetes' | 'etcd';

export interface AgentCounts {
  policies: number;
  rules: number;
  endpoints: number;
}

export interface RealCluster extends WorldWrites {
  /** The pods as the model and the compiler see them (all on the one node, with its interface names). */
  cluster: TestCluster;
  /** Each pod's process, by `<namespace>/<name>`. */
  processes: Map<string, NetnsProcess>;
  /** The agent's programmed policies, rules and endpoints (its metrics). */
  counts(): Promise<AgentCounts | undefined>;
  /** What a compiler fed `world` on this node programs: the agent's counts once it holds the world. */
  expectedCounts(world: PolicyWorld): AgentCounts;
  /** The end of what the agent (and the controllers) logged, for a failure's message. */
  logTail(): Promise<string>;
}

/** A world over this cluster: the generated policies, the fixture's pods, tiers and network sets (always there). */
export function onCluster(world: PolicyWorld, cluster: TestCluster): PolicyWorld {
  return { ...world, cluster, networkSets: TEST_NETWORK_SETS, tiers: TEST_TIERS };
}

/** The fixture without policies. */
export const noPolicies = (cluster: TestCluster): PolicyWorld =>
  onCluster({ cluster, kubernetesPolicies: [], policies: [], networkSets: [], tiers: [] }, cluster);

/** The test cluster with every pod on `node`, its interface named as the plugin names it. */
export function clusterOn(node: string): TestCluster {
  const base = testCluster(() => node);
  return {
    ...base,
    pods: base.pods.map((pod) => ({ ...pod, interfaceName: hostInterfaceName(INTERFACE_PREFIX, `${pod.namespace}.${pod.name}`) })),
  };
}

/** The Pod object's ports: the model's named ports. */
export const podPorts = (pod: TestPod) => pod.ports.map((port) => ({ name: port.name, containerPort: port.port, protocol: port.protocol }));

const metric = (text: string, name: string) => {
  const found = new RegExp(`^${name} (\\d+)$`, 'm').exec(text)?.[1];
  return found === undefined ? undefined : Number(found);
};

/** A RealCluster of its parts: the agent's metrics read by `nodeProcess` (in the node's network namespace). */
export function realCluster(parts: {
  cluster: TestCluster;
  processes: Map<string, NetnsProcess>;
  nodeProcess: NetnsProcess;
  writes: WorldWrites;
  logTail(): Promise<string>;
  /**
   * Workloads of the node that are not probed (an installed cluster's netplug-kube-controllers),
   * with their namespaces and service accounts: the agent programs them too.
   */
  others?: TestCluster;
}): RealCluster {
  const node = parts.cluster.pods[0]?.node ?? '';
  const { others } = parts;
  const withOthers = (world: PolicyWorld): PolicyWorld =>
    others
      ? {
          ...world,
          cluster: {
            namespaces: [...world.cluster.namespaces, ...others.namespaces],
            serviceAccounts: [...world.cluster.serviceAccounts, ...others.serviceAccounts],
            pods: [...world.cluster.pods, ...others.pods],
          },
        }
      : world;
  return {
    ...parts.writes,
    cluster: parts.cluster,
    processes: parts.processes,
    logTail: parts.logTail,
    async counts() {
      const { status, text } = await parts.nodeProcess.fetch(`http://${HEALTH_ADDR}/metrics`);
      if (status !== 200) return undefined;
      const [policies, rules, endpoints] = ['policies', 'rules', 'endpoints'].map((what) =>
        metric(text, `netplug_policy_${what}_programmed`),
      );
      if (policies === undefined || rules === undefined || endpoints === undefined) return undefined;
      return { policies, rules, endpoints };
    },
    expectedCounts(world) {
      const stats = engineFor(withOthers(world), node, { interfacePrefix: INTERFACE_PREFIX }).engine.stats();
      return { policies: stats.activePolicies, rules: stats.policyRules, endpoints: stats.localEndpoints };
    },
  };
}

/** The workload endpoint the plugin's ADD writes for `pod` (policy.type k8s), with the pod's labels then. */
function addedEndpoint(pod: TestPod, labels: Record<string, string>): WorkloadEndpoint {
  const addresses = [pod.ipv4, pod.ipv6];
  return workloadEndpoint(
    pod.namespace,
    {
      orchestrator: 'k8s',
      workload: '',
      node: pod.node,
      containerID: randomBytes(32).toString('hex'),
      pod: pod.name,
      endpoint: 'eth0',
      interfaceName: pod.interfaceName,
      mac: macFor(addresses),
      ipNetworks: addresses.map(hostNetwork),
      profiles: [namespaceProfileName(pod.namespace), serviceAccountProfileName(pod.namespace, pod.serviceAccount)],
      serviceAccountName: pod.serviceAccount,
      ports: pod.ports,
    },
    { ...labels, 'projectnet.org/serviceaccount': pod.serviceAccount, 'projectnet.org/network': 'k8s-pod-network' },
  );
}

/** Until every profile and every endpoint's labels are in etcd, as the controllers keep them. */
async function controllersCaughtUp(store: Store, cluster: TestCluster, logTail: () => string): Promise<void> {
  const profiles = [
    ...cluster.namespaces.map((namespace) => namespaceProfileName(namespace.name)),
    ...cluster.serviceAccounts.map((account) => serviceAccountProfileName(account.namespace, account.name)),
  ];
  await eventually(
    "netplug-kube-controllers to write the profiles and give the endpoints their pods' labels",
    async () => {
      const found = await Promise.all(profiles.map((name) => store.get(keys.profile(name))));
      if (found.some((entry) => entry === undefined)) return false;
      const endpoints = await Promise.all(
        cluster.pods.map((pod) =>
          store.get<WorkloadEndpoint>(keys.workloadEndpoint(pod.namespace, workloadEndpointName(pod.node, 'k8s', pod.name, 'eth0'))),
        ),
      );
      return endpoints.every((entry, i) => entry?.value.metadata.labels['pod'] === cluster.pods[i]?.name);
    },
    { timeoutMs: 60_000, context: logTail },
  );
}

export async function startRealCluster(shared: Teardowns, datastore: Datastore): Promise<RealCluster> {
  const policyNode = await startPolicyNode(shared, datastore === 'etcd' ? 'pne1' : 'pn1', datastore);
  const { kube, node, etcd } = policyNode;
  const cluster = clusterOn(node.name);
  let store: Store | undefined;
  let netplug: NetplugWrites = netplugThroughApi(kube.custom);
  let controllerLines: string[] = [];
  if (etcd) {
    store = await openStore({ etcd_endpoints: etcd.endpoints });
    shared.teardown(() => store?.close());
    const identity = await controllersIdentity(kube, 'netplug-kube-controllers-truth', [...CONTROLLER_RULES, ...CONTROLLER_ETCD_RULES]);
    const controllers = await startControllers(shared, {
      DATASTORE_TYPE: 'etcdv3',
      ETCD_ENDPOINTS: etcd.endpoints,
      KUBECONFIG: identity.kubeconfig,
      ENABLED_CONTROLLERS: 'policy,profile,workloadendpoint',
    });
    controllerLines = controllers.lines;
    netplug = netplugThroughCtl([`--etcd-endpoints=${etcd.endpoints}`], tempDir(shared, 'truth-table'));
  }
  const logTail = () =>
    [
      ...(controllerLines.length > 0 ? ['controllers:', ...controllerLines.join('').split('\n').slice(-15), 'agent:'] : []),
      ...policyNode.log().split('\n').slice(-30),
    ].join('\n');

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
  await netplug.create([...TEST_TIERS, ...TEST_NETWORK_SETS]);
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
      ports: podPorts(pod),
    });
    if (store) {
      const endpoint = addedEndpoint(pod, {});
      if (!(await store.commit([{ key: keys.workloadEndpoint(pod.namespace, endpoint.metadata.name), create: endpoint }])))
        throw new Error(`the workload endpoint of ${pod.key} exists`);
    }
    processes.set(pod.key, new NetnsProcess(shared, netns, PORTS));
  }
  await Promise.all([...processes.values()].map((each) => each.ready));
  if (store) await controllersCaughtUp(store, cluster, logTail);
  // Reads the agent's metrics from inside the node, where its health server listens.
  const nodeProcess = new NetnsProcess(shared, node.netns);
  await nodeProcess.ready;
  policyNode.startAgent();
  return realCluster({ cluster, processes, nodeProcess, writes: worldWrites(kube.custom, netplug), logTail: async () => logTail() });
}
