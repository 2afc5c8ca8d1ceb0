// netplug-node's watch of its node's pods (ts/node/cni/watch-pods.ts), on a real kube-apiserver: an ADD
// for a pod the watch holds reads neither the pod nor its namespace from the API, and their
// annotations apply as a GET's would. A pod of another node, and an agent whose identity may not
// watch pods (an upgrade that kept the old RBAC), read with GETs, with the same results. A pod
// deleted and created again under its name gets the new pod's annotations, whichever way it is read.
import test, { type ExecutionContext } from 'ava';
import type * as k8s from '@kubernetes/client-node';

import { callAgent } from '../helpers/agent-client.ts';
import { agentMetric, spawnAgent, type AgentProcess } from '../helpers/agent-server.ts';
import { addressesOf } from '../helpers/ipam.ts';
import { containerId, createNetns } from '../helpers/kernel.ts';
import { DATASTORE_RULES, installCrds, PLUGIN_RULES, removeIpamLockFileAfter, startKube, type Kube } from '../helpers/kube.ts';
import { sharedTeardowns } from '../helpers/shared.ts';
import { eventually } from '../helpers/eventually.ts';
import { NODE_AGENT_DATASTORE_RULES, NODE_AGENT_RULES } from './agent.ts';

const POOL = '10.224.0.0/16';
const NODE = 'node-watched-pods';
const OTHER_NODE = 'node-watched-pods-other';
const NAMESPACE = `watched-${process.pid}`;
const IP_ADDRS = 'cni.projectnet.org/ipAddrs';

let kube: Kube;
let pluginKubeconfig: string;
const shared = sharedTeardowns(test);

test.before(async () => {
  removeIpamLockFileAfter(shared);
  kube = await startKube(shared);
  await installCrds(kube);
  pluginKubeconfig = (await kube.identityWith('netplug-cni-watched', [...PLUGIN_RULES, ...DATASTORE_RULES])).kubeconfig;
  for (const name of [NODE, OTHER_NODE]) await kube.core.createNode({ body: { metadata: { name } } });
  await kube.core.createNamespace({ body: { metadata: { name: NAMESPACE } } });
});

/** The agent, with the rules the manifests give it, or without the new pods and namespaces rule. */
async function agentWith(t: ExecutionContext, name: string, rules: k8s.V1PolicyRule[]): Promise<AgentProcess> {
  const identity = await kube.identityWith(name, [...rules, ...NODE_AGENT_DATASTORE_RULES, ...PLUGIN_RULES, ...DATASTORE_RULES]);
  return spawnAgent(t, {
    NODENAME: NODE,
    DATASTORE_TYPE: 'kubernetes',
    KUBECONFIG: identity.kubeconfig,
    NETPLUG_IPV4POOL_CIDR: POOL,
    NETPLUG_NETWORKING_BACKEND: 'none',
  });
}

/** A pod bound to `node`, as the scheduler leaves it for the kubelet, asking for `address`. */
async function createBoundPod(name: string, node: string, address: string): Promise<string> {
  const pod = await kube.core.createNamespacedPod({
    namespace: NAMESPACE,
    body: {
      metadata: { name, labels: { app: name }, annotations: { [IP_ADDRS]: JSON.stringify([address]) } },
      spec: { nodeName: node, containers: [{ name: 'main', image: 'busybox' }] },
    },
  });
  return pod.metadata?.uid as string;
}

async function deletePod(name: string): Promise<void> {
  await kube.core.deleteNamespacedPod({ namespace: NAMESPACE, name, gracePeriodSeconds: 0 });
}

/** ADD then DEL of `pod` (with its uid, as containerd and CRI-O pass it): the address, and where the pod was read from. */
async function addAndDelete(t: ExecutionContext, agent: AgentProcess, pod: string, uid: string) {
  const netns = createNetns(t, 'watched');
  const call = {
    containerId: containerId(),
    netns: netns.path,
    args: `IgnoreUnknown=1;K8S_POD_NAMESPACE=${NAMESPACE};K8S_POD_NAME=${pod};K8S_POD_UID=${uid}`,
    netconf: {
      cniVersion: '1.1.0',
      name: 'watched-pods',
      type: 'netplug',
      log_level: 'debug',
      nodename: NODE,
      datastore_type: 'kubernetes',
      kubernetes: { kubeconfig: pluginKubeconfig },
      policy: { type: 'k8s' },
      ipam: { type: 'netplug-ipam' },
    },
  };
  const add = await callAgent(agent.socket, { ...call, command: 'ADD' });
  t.is(add.exitCode, 0, add.stdout);
  const from = /pod read from Kubernetes .*from="([^"]+)"/.exec(add.stderr ?? '')?.[1];
  const del = await callAgent(agent.socket, { ...call, command: 'DEL' });
  t.is(del.exitCode, 0, del.stdout);
  return { address: addressesOf(add.json)[0], from };
}

test.serial(
  'an ADD for a pod the watch holds reads nothing from the API; another node’s pod, or a pod created again, is read',
  async (t) => {
    const agent = await agentWith(t, 'netplug-node-watched', NODE_AGENT_RULES);
    const uid = await createBoundPod('web', NODE, '10.224.0.77');
    await eventually('the watch holds the pod', async () => (await agentMetric(agent, 'netplug_watched_pods')) === 1);

    const watched = await addAndDelete(t, agent, 'web', uid);
    t.deepEqual(watched, { address: '10.224.0.77', from: 'netplug-node watch' }, 'its annotation applied, from the watch');
    t.is(await agentMetric(agent, 'netplug_pod_reads_total{from="watch"}'), 1);

    // Deleted and created again under its name (a StatefulSet's pod): the runtime's ADD names the new
    // uid. Held already or not, the new pod's annotation is the one that applies.
    await deletePod('web');
    const again = await createBoundPod('web', NODE, '10.224.0.78');
    const recreated = await addAndDelete(t, agent, 'web', again);
    t.is(recreated.address, '10.224.0.78');
    t.log(`the pod created again was read from: ${recreated.from}`);

    // A pod bound to another node is not in this node's watch.
    const otherUid = await createBoundPod('elsewhere', OTHER_NODE, '10.224.0.79');
    t.deepEqual(await addAndDelete(t, agent, 'elsewhere', otherUid), { address: '10.224.0.79', from: 'API' });
    t.true((await agentMetric(agent, 'netplug_pod_reads_total{from="api"}')) >= 1);
    await Promise.all([deletePod('web'), deletePod('elsewhere')]);
  },
);

test.serial('an agent that may not watch pods (RBAC from before) reads them, and says what it lacks', async (t) => {
  const withoutPods = NODE_AGENT_RULES.filter((rule) => !rule.resources?.includes('pods'));
  const agent = await agentWith(t, 'netplug-node-unwatched', withoutPods);
  const uid = await createBoundPod('api-read', NODE, '10.224.0.80');
  const refused = /watching the pods of node node-watched-pods failed \(HTTP 403: pods is forbidden: .*cannot list resource "pods"/;
  await eventually('the agent says its watch was refused, on one line', () => refused.test(agent.output()));

  t.deepEqual(await addAndDelete(t, agent, 'api-read', uid), { address: '10.224.0.80', from: 'API' });
  t.is(await agentMetric(agent, 'netplug_pod_reads_total{from="api"}'), 1);
  t.is(await agentMetric(agent, 'netplug_watched_pods'), 0);
  await deletePod('api-read');
});
