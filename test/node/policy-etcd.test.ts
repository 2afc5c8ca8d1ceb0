// Network policy enforced by netplug-node on the etcd datastore, proved with real packets. As in
// policy-enforcement.test.ts (the Kubernetes datastore), one "node" (a network namespace reaching
// a real etcd and kube-apiserver through relays; policy-node.ts) runs netplug-node from source
// with NETPLUG_POLICY_ENFORCEMENT=true, and its pods are network namespaces plugged in as the
// plugin plugs them (a `cali…` veth, the pod's address routed to it, proxy ARP). Here the agent
// learns of them from etcd alone: each pod's workload endpoint, the namespace's and service
// account's profiles and the `knp.default.*` policies are written to etcd as the plugin and
// netplug-kube-controllers write them. TCP between pods: a listener in the target's namespace
// echoes what it receives; a client connects, sends, waits for the echo. Everything (namespaces,
// processes, the table with its namespace, etcd) goes at the end.
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

import test from 'ava';

import { hostInterfaceName } from '../../ts/dataplane/index.ts';
import { keys } from '../../ts/model/keys.ts';
import { poolResource } from '../../ts/model/pool-resource.ts';
import { workloadEndpoint, workloadEndpointName, type WorkloadEndpoint } from '../../ts/model/workload-endpoint.ts';
import { statusFileName } from '../../ts/plugin/policy-wait.ts';
import { convertKubernetesPolicy, type KubeNetworkPolicy, namespaceProfile, serviceAccountProfile } from '../../ts/policy/kubernetes.ts';
import { openStore } from '../../ts/store/open.ts';
import type { Store } from '../../ts/store/store.ts';
import { eventually } from '../helpers/eventually.ts';
import { containerId } from '../helpers/kernel.ts';
import type { Kube } from '../helpers/kube.ts';
import type { Netns, TestNode } from '../helpers/nodes.ts';
import { sharedTeardowns } from '../helpers/shared.ts';
import {
  connects,
  dispatchedIn,
  ECHO_PORT,
  echoListener,
  inNs,
  plugNetns,
  podCni,
  type PolicyNode,
  reaches,
  settles,
  startPolicyNode,
} from './policy-node.ts';

const NAMESPACE = `poletcd-${process.pid}`;
const PORT = ECHO_PORT;
const shared = sharedTeardowns(test);

let policyNode: PolicyNode;
let kube: Kube;
let store: Store;
let node: TestNode;
let etcdEndpoints = '';
const until = (what: string, check: () => boolean | Promise<boolean>, timeoutMs = 60_000) =>
  eventually(what, check, { timeoutMs, context: () => policyNode.log().split('\n').slice(-30).join('\n') });
const statusDir = () => policyNode.statusDir;
const startAgent = () => policyNode.startAgent();
const stopAgent = () => policyNode.stopAgent();
const agentGet = (path: string) => policyNode.agentGet(path);
const nftList = () => policyNode.nftList();

interface TestPod {
  name: string;
  netns: Netns;
  address: string;
  hostInterface: string;
  endpointKey: string;
}
const pods = new Map<string, TestPod>();

/** The workload endpoint the plugin's ADD writes for a pod of `nodeName`. */
function endpointOf(
  name: string,
  nodeName: string,
  address: string,
  hostInterface: string,
  labels: Record<string, string>,
): WorkloadEndpoint {
  return workloadEndpoint(
    NAMESPACE,
    {
      orchestrator: 'k8s',
      workload: '',
      node: nodeName,
      containerID: `c-${name}`,
      pod: name,
      endpoint: 'eth0',
      interfaceName: hostInterface,
      mac: '0a:58:0a:4f:00:01',
      ipNetworks: [`${address}/32`],
      profiles: [`kns.${NAMESPACE}`, `ksa.${NAMESPACE}.default`],
      serviceAccountName: 'default',
    },
    { ...labels, 'projectnet.org/serviceaccount': 'default', 'projectnet.org/network': 'k8s-pod-network' },
  );
}

/** Writes (creates or replaces) a document. */
async function put(key: string, value: unknown): Promise<void> {
  const current = await store.get(key);
  const ok = await store.commit([current ? { key, update: value, revision: current.revision } : { key, create: value }]);
  if (!ok) throw new Error(`${key} changed meanwhile`);
}

async function remove(key: string): Promise<void> {
  const current = await store.get(key);
  if (current && !(await store.commit([{ key, remove: true, revision: current.revision }]))) throw new Error(`${key} changed meanwhile`);
}

/** A pod's namespace plugged into the node as the plugin plugs it, and its workload endpoint in etcd. */
async function plugPod(name: string, address: string, labels: Record<string, string>): Promise<TestPod> {
  const host = hostInterfaceName('cali', `${NAMESPACE}.${name}`);
  const netns = plugNetns(shared, node, `npetcd-${name}-${process.pid}`, address, host);
  const endpoint = endpointOf(name, node.name, address, host, labels);
  const endpointKey = keys.workloadEndpoint(NAMESPACE, endpoint.metadata.name);
  await put(endpointKey, endpoint);
  echoListener(shared, netns);
  const made: TestPod = { name, netns, address, hostInterface: host, endpointKey };
  pods.set(name, made);
  await until(`the listener in ${name}`, () => inNs(netns, ['sh', '-c', `ss -ltn | grep -q :${PORT}`]).status === 0);
  return made;
}

/** The host interfaces in the dispatch map `to-wl` as the kernel holds it. */
const dispatched = () => dispatchedIn(nftList().stdout ?? '');

const fileOf = (pod: TestPod) => join(statusDir(), statusFileName('k8s', NAMESPACE, pod.name, 'eth0'));

/** A Kubernetes NetworkPolicy of this namespace as netplug-kube-controllers writes it to etcd. */
async function putKubernetesPolicy(name: string, spec: KubeNetworkPolicy['spec']): Promise<void> {
  const { policy } = convertKubernetesPolicy({ metadata: { name, namespace: NAMESPACE }, spec });
  await put(keys.networkPolicy(NAMESPACE, policy.metadata.name), policy);
}
const removeKubernetesPolicy = (name: string) => remove(keys.networkPolicy(NAMESPACE, `knp.default.${name}`));

test.before(async () => {
  // The API server (pods' objects, the agent's identity with the shipped etcd roles), etcd, the node.
  policyNode = await startPolicyNode(shared, 'pe1', 'etcd');
  ({ kube, node } = policyNode);
  etcdEndpoints = policyNode.etcd!.endpoints;
  store = await openStore({ etcd_endpoints: etcdEndpoints });
  // The pool the ADDs the agent serves take addresses from.
  await put(keys.pool('policy-etcd-pods'), poolResource('policy-etcd-pods', { cidr: '10.80.0.0/16', 'block-size': '26' }, new Date()));
  shared.teardown(() => store.close());
  // The profiles netplug-kube-controllers keeps for the namespace and its default service account.
  const namespaceObject = { metadata: { name: NAMESPACE, labels: { team: 'a' } } };
  await put(keys.profile(`kns.${NAMESPACE}`), namespaceProfile(namespaceObject));
  await put(keys.profile(`ksa.${NAMESPACE}.default`), serviceAccountProfile({ metadata: { name: 'default', namespace: NAMESPACE } }));
  await kube.core.createNamespace({ body: { metadata: { name: NAMESPACE } } });
  shared.teardown(() => kube.core.deleteNamespace({ name: NAMESPACE }).catch(() => undefined));
});

test.afterEach.always((t) => {
  if (!t.passed) t.log(policyNode.log().split('\n').slice(-40).join('\n'));
});

test.serial('without policy both pods reach each other; each status file names a dispatched interface and the pod', async (t) => {
  const a = await plugPod('a', '10.79.0.10', { app: 'a' });
  const b = await plugPod('b', '10.79.0.11', { app: 'b' });
  // A pod of another node: a peer selectors may name, never dispatched here.
  await put(
    keys.workloadEndpoint(NAMESPACE, 'pe2-k8s-remote-eth0'),
    endpointOf('remote', 'pe2', '10.79.1.10', hostInterfaceName('cali', `${NAMESPACE}.remote`), { app: 'a' }),
  );
  startAgent();
  const seen = new Set<string>();
  await until(
    'both status files',
    () => {
      for (const pod of [a, b]) {
        if (seen.has(pod.name) || !existsSync(fileOf(pod))) continue;
        t.true(dispatched().includes(pod.hostInterface), `${pod.name}'s interface is dispatched when its file exists`);
        seen.add(pod.name);
      }
      return seen.size === 2;
    },
    90_000,
  );
  t.deepEqual(JSON.parse(readFileSync(fileOf(a), 'utf8')), {
    ifaceName: a.hostInterface,
    mac: '0a:58:0a:4f:00:01',
    ipv4Nets: ['10.79.0.10/32'],
  });
  t.true(await settles(a, b, true));
  t.true(await settles(b, a, true));
  await until('the agent is ready', () => agentGet('/readyz').status === 200);
  t.regex(agentGet('/metrics').text, /^netplug_policy_endpoints_programmed 2$/m);
  t.deepEqual(dispatched().sort(), [a.hostInterface, b.hostInterface].sort(), 'the remote endpoint is not dispatched here');
});

test.serial('a default-deny ingress policy on b blocks a → b but not b → a; allowing a by its labels lets it through', async (t) => {
  const [a, b] = [pods.get('a') as TestPod, pods.get('b') as TestPod];
  await putKubernetesPolicy('deny-b', { podSelector: { matchLabels: { app: 'b' } }, policyTypes: ['Ingress'] });
  t.true(await settles(a, b, false));
  t.true(await settles(b, a, true), "b's own connections and their replies still flow");
  await putKubernetesPolicy('a-to-b', {
    podSelector: { matchLabels: { app: 'b' } },
    ingress: [{ from: [{ podSelector: { matchLabels: { app: 'a' } } }], ports: [{ port: PORT }] }],
  });
  t.true(await settles(a, b, true));
});

test.serial("a pod's labels changed on its workload endpoint (the workloadendpoint controller) change what selects it", async (t) => {
  const [a, b] = [pods.get('a') as TestPod, pods.get('b') as TestPod];
  const entry = await store.get<WorkloadEndpoint>(a.endpointKey);
  const relabelled = entry?.value as WorkloadEndpoint;
  await put(a.endpointKey, {
    ...relabelled,
    metadata: { ...relabelled.metadata, labels: { ...relabelled.metadata.labels, app: 'other' } },
  });
  t.true(await settles(a, b, false), 'a no longer matches the allow policy');
  await put(a.endpointKey, relabelled);
  t.true(await settles(a, b, true));
  // The namespace's labels, through its profile: a policy allowing namespaces labelled team=a still lets a in.
  await removeKubernetesPolicy('a-to-b');
  t.true(await settles(a, b, false));
  await putKubernetesPolicy('team-a', {
    podSelector: { matchLabels: { app: 'b' } },
    ingress: [{ from: [{ namespaceSelector: { matchLabels: { team: 'a' } } }] }],
  });
  t.true(await settles(a, b, true));
  await put(keys.profile(`kns.${NAMESPACE}`), namespaceProfile({ metadata: { name: NAMESPACE, labels: { team: 'b' } } }));
  t.true(await settles(a, b, false), "the namespace's profile lost the label the policy selects");
  await removeKubernetesPolicy('team-a');
  await removeKubernetesPolicy('deny-b');
  t.true(await settles(a, b, true));
});

test.serial(
  'a pod networked by an ADD the agent serves is policed from its first packet: the ADD answers once its policy is in',
  async (t) => {
    const a = pods.get('a') as TestPod;
    await putKubernetesPolicy('deny-new', { podSelector: { matchLabels: { app: 'new' } }, policyTypes: ['Ingress'] });
    await kube.core.createNamespacedPod({
      namespace: NAMESPACE,
      body: {
        metadata: { name: 'new', labels: { app: 'new' } },
        spec: { nodeName: node.name, containers: [{ name: 'main', image: 'busybox' }] },
      },
    });
    const id = containerId();
    const netconf = {
      cniVersion: '1.1.0',
      name: 'k8s-pod-network',
      type: 'netplug',
      nodename: node.name,
      etcd_endpoints: etcdEndpoints,
      kubernetes: { kubeconfig: kube.server.admin.kubeconfig },
      policy: { type: 'k8s' },
      ipam: { type: 'netplug-ipam' },
      // A wait longer than the call's 60 s limit: the ADD answers only because the file is
      // already there when the plugin starts waiting.
      policy_setup_timeout_seconds: 3600,
      endpoint_status_dir: statusDir(),
    };
    const { netns, cni } = podCni(shared, node, {
      netnsName: `npetcd-new-${process.pid}`,
      namespace: NAMESPACE,
      name: 'new',
      containerId: id,
      netconf,
    });
    shared.teardown(() => cni('DEL'));
    const added = cni('ADD');
    t.is(added.status, 0, `${added.stdout} ${added.stderr}`);
    const address = (JSON.parse(added.stdout) as { ips: { address: string }[] }).ips[0]?.address.split('/')[0] as string;
    const made: TestPod = {
      name: 'new',
      netns,
      address,
      hostInterface: hostInterfaceName('cali', `${NAMESPACE}.new`),
      endpointKey: keys.workloadEndpoint(NAMESPACE, workloadEndpointName(node.name, 'k8s', 'new', 'eth0')),
    };
    t.notRegex(added.stderr, /did not report the pod's policy programmed/);
    t.true(existsSync(fileOf(made)), 'the status file is written before the ADD answers');
    t.true(dispatched().includes(made.hostInterface));
    t.true(await reaches(made, a), 'it connects out');
    echoListener(shared, netns);
    await until('the listener in the new pod', () => inNs(netns, ['sh', '-c', `ss -ltn | grep -q :${PORT}`]).status === 0);
    t.false(connects(a, made), 'its ingress is denied by the policy that selects its labels');
    await removeKubernetesPolicy('deny-new');
    t.true(await settles(a, made, true), 'and opens when the policy goes: the networking itself works');
    const del = cni('DEL');
    t.is(del.status, 0, del.stderr);
    await until(
      'its endpoint, status file and dispatch entry go with its DEL',
      async () =>
        !existsSync(fileOf(made)) && !dispatched().includes(made.hostInterface) && (await store.get(made.endpointKey)) === undefined,
    );
  },
);

test.serial('a workload endpoint removed takes its status file and its dispatch entry', async (t) => {
  const c = await plugPod('c', '10.79.0.12', { app: 'c' });
  await until('c is programmed', () => existsSync(fileOf(c)));
  t.true(dispatched().includes(c.hostInterface));
  await remove(c.endpointKey);
  await until('c is forgotten', () => !existsSync(fileOf(c)) && !dispatched().includes(c.hostInterface));
  t.deepEqual(
    readdirSync(statusDir()).sort(),
    [statusFileName('k8s', NAMESPACE, 'a', 'eth0'), statusFileName('k8s', NAMESPACE, 'b', 'eth0')].sort(),
  );
});

test.serial("a pod made again on this node keeps its policy when its old node's endpoint goes after", async (t) => {
  const a = pods.get('a') as TestPod;
  // As a StatefulSet's pod moved here: the old node's endpoint lingers until its DEL or the ipam controller.
  const oldKey = keys.workloadEndpoint(NAMESPACE, 'pe2-k8s-moved-eth0');
  await put(oldKey, endpointOf('moved', 'pe2', '10.79.1.20', 'cali0000moved', { app: 'moved' }));
  const moved = await plugPod('moved', '10.79.0.20', { app: 'moved' });
  await until('the moved pod is programmed here', () => existsSync(fileOf(moved)) && dispatched().includes(moved.hostInterface));
  t.true(await settles(a, moved, true));
  await remove(oldKey);
  t.true(await settles(a, moved, true), 'still reachable once the old endpoint went');
  t.true(existsSync(fileOf(moved)) && dispatched().includes(moved.hostInterface));
  t.is(await stopAgent(), 0);
});
