// Part of the truth table (test/policy/truth-table.ts) under the real kubelet, with netplug
// installed by deploy/manifests/netplug.yaml (enforcement on): pods a, b, c in namespaces x, y, z
// are real pods (busybox, their named ports and service accounts as the model has them), given the
// model's addresses by the ipAddrs annotation from a pool of their own, networked by the plugin
// through containerd. Each pod's serving and probing process (pod-process.ts) runs in the network
// namespace containerd made for it, entered from this machine: the packets are the pod's, through
// its veth and netplug-node's table; busybox has no UDP echo server, and one `kubectl exec` a probe
// would be too slow for the 324 cells of a world. The agent's counts are expected with the node's
// other pod (netplug-kube-controllers') fed to the compiler too. 20 worlds (the local suites probe
// many more): what this adds is the install, the plugin and the kubelet.
import { execFile, spawnSync } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';

import test from 'ava';
import * as k8s from '@kubernetes/client-node';

import { hostInterfaceName } from '../../ts/dataplane/index.ts';
import { ANNOTATIONS } from '../../ts/model/pod-annotations.ts';
import { apply, BUSYBOX_IMAGE, clusterPerFile, getJson, type Cluster } from '../helpers/cluster.ts';
import type { Teardowns } from '../helpers/shared.ts';
import { PORTS, type TestCluster, type TestPod } from '../policy/cluster.ts';
import { TEST_NETWORK_SETS, TEST_TIERS } from '../policy/generate.ts';
import { NetnsProcess } from '../policy/probe.ts';
import { clusterOn, INTERFACE_PREFIX, podPorts, realCluster, type RealCluster } from '../policy/real-cluster.ts';
import { truthTableSuite } from '../policy/truth-table.ts';
import { netplugThroughApi, worldWrites } from '../policy/world-writes.ts';
import { eventually, imageArchive, manifestFor, NETPLUGCTL, nodePaths, writeKubeadmConfig } from './install.ts';

const ROOT = new URL('../../', import.meta.url).pathname;
/** Holds the model's pod addresses (10.1-3.0.x); no other pod takes from it (its node selector selects no node). */
const POOL = { name: 'truth-table', cidr: '10.0.0.0/14' };

const cluster = clusterPerFile(test, { systemPlugins: false });

/**
 * The manifest applied as a cluster operator applies it, enforcement on whatever the shipped
 * default, the agent's status files in the test node's socket directory (its /var/run/netplug).
 */
async function install(c: Cluster): Promise<void> {
  await c.importImage(imageArchive());
  await writeKubeadmConfig(c);
  const paths = nodePaths(c);
  const manifest = manifestFor(c, 'netplug.yaml', paths, {
    endpoint_status_path_prefix: dirname(paths.agentSocket),
    policy_enforcement: 'true',
  });
  await c.kubectl('apply', '--server-side', '--force-conflicts', '-f', join(ROOT, 'deploy/manifests/crds.yaml'));
  await c.kubectl('wait', '--for=condition=Established', 'crd', '--all', '--timeout=60s');
  await c.kubectl('apply', '--server-side', '--force-conflicts', '-f', manifest);
  await c.kubectl('rollout', 'status', '-n', 'kube-system', 'daemonset/netplug-node', '--timeout=300s');
  await c.kubectl('rollout', 'status', '-n', 'kube-system', 'deployment/netplug-kube-controllers', '--timeout=300s');
  // Not blocking: the kubeconfig's API address is a relay in this process.
  await promisify(execFile)(NETPLUGCTL, [
    `--kubeconfig=${c.kubeconfig}`,
    ...['pool', 'create', POOL.name, '--cidr', POOL.cidr, '--node-selector', '!all()'],
  ]);
}

const podObject = (pod: TestPod) => ({
  apiVersion: 'v1',
  kind: 'Pod',
  metadata: {
    name: pod.name,
    namespace: pod.namespace,
    labels: pod.labels,
    annotations: { [ANNOTATIONS.ipAddrs]: JSON.stringify([pod.ipv4]) },
  },
  spec: {
    serviceAccountName: pod.serviceAccount,
    terminationGracePeriodSeconds: 1,
    containers: [{ name: 'main', image: BUSYBOX_IMAGE, imagePullPolicy: 'Never', command: ['sleep', '3600'], ports: podPorts(pod) }],
  },
});

/** Each pod network namespace containerd made, by the IPv4 address of its eth0. */
function namespacesByAddress(c: Cluster): Map<string, string> {
  const found = new Map<string, string>();
  for (const name of readdirSync(c.netnsDir)) {
    const path = join(c.netnsDir, name);
    const shown = spawnSync('nsenter', [`--net=${path}`, '--', 'ip', '-4', '-o', 'addr', 'show'], { encoding: 'utf8' }).stdout ?? '';
    const address = /^\d+: eth0\s+inet (\S+)\//m.exec(shown)?.[1];
    if (address) found.set(address, path);
  }
  return found;
}

/** The node's other pod-network pods (netplug-kube-controllers'), their namespaces and service accounts, as the model describes pods. */
async function otherWorkloads(c: Cluster, model: TestCluster): Promise<TestCluster> {
  const ours = new Set(model.namespaces.map((namespace) => namespace.name));
  const items = (await getJson(c, 'pods', '-A')).items as any[];
  const pods = items
    .filter((pod) => !pod.spec.hostNetwork && !ours.has(pod.metadata.namespace))
    .map(
      (pod): TestPod => ({
        key: `${pod.metadata.namespace}/${pod.metadata.name}`,
        namespace: pod.metadata.namespace,
        name: pod.metadata.name,
        labels: pod.metadata.labels ?? {},
        serviceAccount: pod.spec.serviceAccountName ?? 'default',
        ipv4: pod.status.podIP,
        ipv6: '',
        node: c.nodeName,
        interfaceName: hostInterfaceName(INTERFACE_PREFIX, `${pod.metadata.namespace}.${pod.metadata.name}`),
        ports: pod.spec.containers.flatMap((container: any) =>
          (container.ports ?? [])
            .filter((port: any) => port.name)
            .map((port: any) => ({ name: port.name, protocol: port.protocol ?? 'TCP', port: port.containerPort })),
        ),
      }),
    );
  const namespaces = [...new Set(pods.map((pod) => pod.namespace))];
  const labelsOf = async (...args: string[]) => (await getJson(c, ...args)).metadata.labels ?? {};
  return {
    pods,
    namespaces: await Promise.all(namespaces.map(async (name) => ({ name, labels: await labelsOf('namespace', name) }))),
    serviceAccounts: await Promise.all(
      [...new Set(pods.map((pod) => `${pod.namespace}/${pod.serviceAccount}`))].map(async (key) => {
        const [namespace = '', name = ''] = key.split('/');
        return { namespace, name, labels: await labelsOf('serviceaccount', '-n', namespace, name) };
      }),
    ),
  };
}

async function startOnKubelet(shared: Teardowns): Promise<RealCluster> {
  const c = cluster();
  await install(c);
  const base = clusterOn(c.nodeName);
  // Real pods have the IPv4 address only (IPv6 changes no IPv4 probe's verdict).
  const model: TestCluster = { ...base, pods: base.pods.map((pod) => ({ ...pod, ipv6: '' })) };
  const config = new k8s.KubeConfig();
  config.loadFromFile(c.kubeconfig);
  const custom = config.makeApiClient(k8s.CustomObjectsApi);
  await apply(
    c,
    ...model.namespaces.map((namespace) => ({ apiVersion: 'v1', kind: 'Namespace', metadata: namespace })),
    // `default` is the controller-manager's to make.
    ...model.serviceAccounts
      .filter((account) => account.name !== 'default')
      .map((account) => ({ apiVersion: 'v1', kind: 'ServiceAccount', metadata: account })),
  );
  for (const namespace of model.namespaces)
    await eventually(`the default service account of ${namespace.name}`, () =>
      c.kubectl('get', 'serviceaccount', '-n', namespace.name, 'default'),
    );
  const netplug = netplugThroughApi(custom);
  await netplug.create([...TEST_TIERS, ...TEST_NETWORK_SETS]);
  await apply(c, ...model.pods.map(podObject));
  for (const namespace of model.namespaces)
    await c.kubectl('wait', '-n', namespace.name, '--for=condition=Ready', 'pod', '--all', '--timeout=180s');
  const namespaces = namespacesByAddress(c);
  const processes = new Map<string, NetnsProcess>();
  for (const pod of model.pods) {
    const ip = (await getJson(c, 'pod', '-n', pod.namespace, pod.name)).status.podIP;
    const path = namespaces.get(pod.ipv4);
    if (ip !== pod.ipv4 || !path)
      throw new Error(`${pod.key} has ${ip}, not ${pod.ipv4} (${ANNOTATIONS.ipAddrs}), or no network namespace`);
    processes.set(pod.key, new NetnsProcess(shared, { name: pod.key, path }, PORTS));
  }
  await Promise.all([...processes.values()].map((each) => each.ready));
  const nodeProcess = new NetnsProcess(shared, { name: c.netns, path: c.netnsPath });
  await nodeProcess.ready;
  const logTail = async () => {
    const [agent] = (await getJson(c, 'pods', '-n', 'kube-system', '-l', 'k8s-app=netplug-node')).items;
    return c.kubectl('logs', '-n', 'kube-system', agent.metadata.name, '-c', 'netplug-node', '--tail=40').catch((e: Error) => e.message);
  };
  const others = await otherWorkloads(c, model);
  // The pods, namespaces, pool and policies go with the cluster (clusterPerFile).
  return realCluster({ cluster: model, processes, nodeProcess, writes: worldWrites(custom, netplug), logTail, others });
}

truthTableSuite(test, { start: startOnKubelet, cases: 20, seedOffset: 700 });
