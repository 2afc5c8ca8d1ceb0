// Network policy enforced by netplug-node on the Kubernetes datastore, proved with real packets.
// One "node" running netplug-node from source with enforcement on, its pods network namespaces
// plugged into it as the plugin plugs them, with Pod objects in the API (policy-node.ts). TCP
// between pods: a listener in the target's namespace echoes what it receives; a client connects,
// sends, waits for the echo. Everything (namespaces, processes, the table with its namespace, API
// objects) goes at the end.
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';

import test from 'ava';
import type * as k8s from '@kubernetes/client-node';

import { hostInterfaceName } from '../../ts/dataplane/index.ts';
import { keys } from '../../ts/model/keys.ts';
import { poolResource } from '../../ts/model/pool-resource.ts';
import { statusFileName } from '../../ts/plugin/policy-wait.ts';
import { openStore } from '../../ts/store/open.ts';
import { containerId } from '../helpers/kernel.ts';
import type { Kube } from '../helpers/kube.ts';
import { eventually } from '../helpers/eventually.ts';
import type { Netns, TestNode } from '../helpers/nodes.ts';
import { sharedTeardowns } from '../helpers/shared.ts';
import { observedPolicy } from './policy-observed.ts';
import {
  ECHO_PORT,
  connects,
  connectsTo,
  createRunningPod,
  dispatchedIn,
  echoListener,
  inNs,
  metricValue,
  plugNetns,
  podCni,
  reaches,
  settles,
  sh,
  startPolicyNode,
  type PolicyNode,
} from './policy-node.ts';

const NAMESPACE = `policy-${process.pid}`;
const PORT = ECHO_PORT;
const shared = sharedTeardowns(test);

let policyNode: PolicyNode;
let kube: Kube;
let networking: k8s.NetworkingV1Api;
let node: TestNode;
const until = (what: string, check: () => boolean | Promise<boolean>, timeoutMs = 60_000) =>
  eventually(what, check, { timeoutMs, context: () => policyNode.log().split('\n').slice(-30).join('\n') });
const statusDir = () => policyNode.statusDir;
const startAgent = () => policyNode.startAgent();
const stopAgent = () => policyNode.stopAgent();
const nftList = () => policyNode.nftList();

interface TestPod {
  name: string;
  netns: Netns;
  address: string;
  hostInterface: string;
  listener?: ChildProcess;
}
const pods = new Map<string, TestPod>();

const agentGet = (path: string) => policyNode.agentGet(path);
/** A series' value on the agent's /metrics. */
const metric = (series: string) => metricValue(agentGet('/metrics').text, series);

/** A pod's namespace plugged into the node as the plugin plugs it; with a Pod object unless `object` is false. */
async function plugPod(
  name: string,
  address: string,
  labels: Record<string, string>,
  object = true,
  hostInterface?: string,
): Promise<TestPod> {
  const host = hostInterface ?? hostInterfaceName('cali', `${NAMESPACE}.${name}`);
  const netns = plugNetns(shared, node, `nppol-${name}-${process.pid}`, address, host);
  if (object) await createRunningPod(kube, { namespace: NAMESPACE, name, labels, nodeName: node.name, addresses: [address] });
  const made: TestPod = { name, netns, address, hostInterface: host };
  made.listener = echoListener(shared, made.netns);
  pods.set(name, made);
  return made;
}

/** The host interfaces in the dispatch map `to-wl` as the kernel holds it. */
const dispatched = () => dispatchedIn(nftList().stdout ?? '');

const fileOf = (pod: TestPod) => join(statusDir(), statusFileName('k8s', NAMESPACE, pod.name, 'eth0'));

test.before(async () => {
  policyNode = await startPolicyNode(shared);
  ({ kube, networking, node } = policyNode);
  // The pool the CNI ADDs served by the agent take addresses from.
  const store = await openStore({ datastore_type: 'kubernetes', kubernetes: { kubeconfig: kube.server.admin.kubeconfig } });
  shared.teardown(() => store.close());
  await store.commit([
    { key: keys.pool('policy-pods'), create: poolResource('policy-pods', { cidr: '10.78.0.0/16', 'block-size': '26' }, new Date()) },
  ]);
  await kube.core.createNamespace({ body: { metadata: { name: NAMESPACE } } });
  shared.teardown(() => kube.core.deleteNamespace({ name: NAMESPACE }).catch(() => undefined));
});

test.afterEach.always((t) => {
  if (!t.passed) t.log(policyNode.log().split('\n').slice(-40).join('\n'));
});

test.serial('without policy both pods reach each other, and each status file comes only once its chains are in the kernel', async (t) => {
  const a = await plugPod('a', '10.77.0.10', { app: 'a' });
  const b = await plugPod('b', '10.77.0.11', { app: 'b' });
  t.false(existsSync(statusDir()), 'no status file before the agent runs');
  startAgent();
  // Each status file, the moment it is seen, names an interface the kernel's dispatch map holds.
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
  t.true(await settles(a, b, true));
  t.true(await settles(b, a, true));
  await until('the agent is ready', () => agentGet('/readyz').status === 200);
  const metrics = agentGet('/metrics').text;
  t.regex(metrics, /^netplug_policy_endpoints_programmed 2$/m);
  t.regex(metrics, /^netplug_policy_flush_duration_seconds_count [1-9]/m);
  t.regex(metrics, /^netplug_policy_pod_programmed_seconds_count 2$/m);
});

test.serial('an interface with the workload prefix that no pod owns passes nothing', async (t) => {
  const a = pods.get('a') as TestPod;
  const stray = await plugPod('stray', '10.77.0.99', {}, false, 'cali0000stray');
  t.false(dispatched().includes(stray.hostInterface));
  t.false(connects(stray, a));
  t.false(connects(a, stray));
  // The fail-closed rules counted what they dropped, and /metrics says so.
  await until(
    'fail-closed drops on /metrics',
    () => metric('netplug_policy_default_denied_packets_total{reason="interface-not-programmed"}') > 0,
  );
  t.true(metric('netplug_policy_default_denied_bytes_total{reason="interface-not-programmed"}') > 0);
});

test.serial('a pod cannot send from an address that is not its own, even one the node routes back to it', async (t) => {
  const [a, b] = [pods.get('a') as TestPod, pods.get('b') as TestPod];
  // Another address on a's eth0, which the node routes to a as it routes a's own: b's answers
  // would reach a, so only the anti-spoofing rule of a's egress chain stands in the way.
  const spoofed = '10.77.0.50';
  sh(a.netns, `ip addr add ${spoofed}/32 dev eth0`);
  sh(node.netns, `ip route add ${spoofed}/32 dev ${a.hostInterface}`);
  t.teardown(() => {
    sh(node.netns, `ip route del ${spoofed}/32 dev ${a.hostInterface}`);
    sh(a.netns, `ip addr del ${spoofed}/32 dev eth0`);
  });
  t.true(await reaches(a, b), 'from its own address');
  t.true(connects(a, b, a.address), 'from its own address, named');
  t.false(connects(a, b, spoofed), 'from another address');
  t.false(connects(a, b, spoofed), 'from another address, again');
});

test.serial('a default-deny ingress policy on b blocks a → b but not b → a; allowing a from a podSelector lets it through', async (t) => {
  const [a, b] = [pods.get('a') as TestPod, pods.get('b') as TestPod];
  await networking.createNamespacedNetworkPolicy({
    namespace: NAMESPACE,
    body: { metadata: { name: 'deny-b' }, spec: { podSelector: { matchLabels: { app: 'b' } }, policyTypes: ['Ingress'] } },
  });
  t.true(await settles(a, b, false));
  // b's own connections and their replies still flow.
  t.true(await settles(b, a, true));
  await networking.createNamespacedNetworkPolicy({
    namespace: NAMESPACE,
    body: {
      metadata: { name: 'a-to-b' },
      spec: { podSelector: { matchLabels: { app: 'b' } }, ingress: [{ _from: [{ podSelector: { matchLabels: { app: 'a' } } }] }] },
    },
  });
  t.true(await settles(a, b, true));
  t.true(await settles(b, a, true));
});

test.serial(
  'a policy that cannot be programmed is reported on it (an Event, the metric), and the other policies keep working',
  async (t) => {
    const [a, b] = [pods.get('a') as TestPod, pods.get('b') as TestPod];
    // A string to the CRD's schema, no selector to the agent (`=` is no operator).
    const at = { group: 'projectnet.org', version: 'v3', namespace: NAMESPACE, plural: 'networkpolicies' };
    const spec = { selector: 'app = "a"', ingress: [{ action: 'Deny' }] };
    const body = { apiVersion: 'projectnet.org/v3', kind: 'NetworkPolicy', metadata: { name: 'bad-selector' }, spec };
    const made = (await kube.custom.createNamespacedCustomObject({ ...at, body })) as k8s.KubernetesObject;
    // As `kubectl describe networkpolicies.projectnet.org bad-selector` finds its events.
    const fieldSelector = `involvedObject.kind=NetworkPolicy,involvedObject.name=bad-selector,involvedObject.uid=${made.metadata?.uid}`;
    let events: k8s.CoreV1Event[] = [];
    await until('the event on the policy', async () => {
      events = (await kube.core.listNamespacedEvent({ namespace: NAMESPACE, fieldSelector })).items;
      return events.length > 0;
    });
    t.like(events[0], { type: 'Warning', reason: 'PolicyNotProgrammed', source: { component: 'netplug-node', host: node.name } });
    const field = 'field "spec\\.selector" is not a selector: selector "app = "a""';
    t.regex(events[0]?.message ?? '', new RegExp(`^node ${node.name} cannot program NetworkPolicy/${NAMESPACE}/bad-selector: ${field}`));
    t.is(metric('netplug_policy_issues'), 1);
    t.is(agentGet('/readyz').status, 200);
    // Another policy still takes effect, and goes.
    const denyA = { metadata: { name: 'deny-a' }, spec: { podSelector: { matchLabels: { app: 'a' } }, policyTypes: ['Ingress'] } };
    await networking.createNamespacedNetworkPolicy({ namespace: NAMESPACE, body: denyA });
    t.true(await settles(b, a, false));
    await networking.deleteNamespacedNetworkPolicy({ namespace: NAMESPACE, name: 'deny-a' });
    t.true(await settles(b, a, true));
    await kube.custom.deleteNamespacedCustomObject({ ...at, name: 'bad-selector' });
    await until('the problem is gone', () => metric('netplug_policy_issues') === 0);
  },
);

test.serial('a rule naming a port by number and by name lets both through to a pod that comes after it, and no other port', async (t) => {
  const a = pods.get('a') as TestPod;
  await networking.createNamespacedNetworkPolicy({
    namespace: NAMESPACE,
    body: {
      metadata: { name: 'a-to-w-ports' },
      spec: {
        podSelector: { matchLabels: { app: 'w' } },
        ingress: [{ _from: [{ podSelector: { matchLabels: { app: 'a' } } }], ports: [{ port: 9090 }, { port: 'echo' }] }],
      },
    },
  });
  // The pod comes after the policy: its ports join the policy's set as it is programmed.
  const w = await plugPod('w', '10.77.0.13', { app: 'w' }, false);
  for (const port of [9090, 9191]) echoListener(shared, w.netns, port);
  await createRunningPod(kube, {
    namespace: NAMESPACE,
    name: 'w',
    labels: { app: 'w' },
    nodeName: node.name,
    addresses: [w.address],
    ports: [{ name: 'echo', containerPort: PORT }],
  });
  await until('w is programmed', () => existsSync(fileOf(w)));
  t.true(await settles(a, w, true), 'the named port');
  await until('a → w:9090 connects (the numeric port)', () => connectsTo(a.netns, w.address, 9090));
  t.false(connectsTo(a.netns, w.address, 9191), 'a port the rule does not name');
  t.false(connectsTo(pods.get('b')?.netns as Netns, w.address, 9090), 'a peer the rule does not name');
  await networking.deleteNamespacedNetworkPolicy({ namespace: NAMESPACE, name: 'a-to-w-ports' });
  await kube.core.deleteNamespacedPod({ namespace: NAMESPACE, name: 'w', gracePeriodSeconds: 0 });
  await until('w is forgotten', () => !existsSync(fileOf(w)) && !dispatched().includes(w.hostInterface));
  pods.delete('w');
});

test.serial('a pod deleted loses its status file and its dispatch entry', async (t) => {
  const c = await plugPod('c', '10.77.0.12', { app: 'c' });
  await until('c is programmed', () => existsSync(fileOf(c)));
  t.true(dispatched().includes(c.hostInterface));
  await kube.core.deleteNamespacedPod({ namespace: NAMESPACE, name: 'c', gracePeriodSeconds: 0 });
  await until('c is forgotten', () => !existsSync(fileOf(c)) && !dispatched().includes(c.hostInterface));
  t.deepEqual(
    readdirSync(statusDir()).sort(),
    [statusFileName('k8s', NAMESPACE, 'a', 'eth0'), statusFileName('k8s', NAMESPACE, 'b', 'eth0')].sort(),
  );
});

test.serial(
  'a pod networked by an ADD the agent serves is policed from its first packet: the ADD answers once its policy is in',
  async (t) => {
    const a = pods.get('a') as TestPod;
    await networking.createNamespacedNetworkPolicy({
      namespace: NAMESPACE,
      body: { metadata: { name: 'deny-new' }, spec: { podSelector: { matchLabels: { app: 'new' } }, policyTypes: ['Ingress'] } },
    });
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
      name: 'policy-test',
      type: 'netplug',
      nodename: node.name,
      datastore_type: 'kubernetes',
      kubernetes: { kubeconfig: kube.server.admin.kubeconfig },
      ipam: { type: 'netplug-ipam' },
      // A wait longer than the call's 60 s limit: the ADD answers only because the file is
      // already there when the plugin starts waiting.
      policy_setup_timeout_seconds: 3600,
      endpoint_status_dir: statusDir(),
    };
    const { netns, cni } = podCni(shared, node, {
      netnsName: `nppol-new-${process.pid}`,
      namespace: NAMESPACE,
      name: 'new',
      containerId: id,
      netconf,
    });
    shared.teardown(() => cni('DEL'));
    const added = cni('ADD');
    t.is(added.status, 0, `${added.stdout} ${added.stderr}`);
    const address = (JSON.parse(added.stdout) as { ips: { address: string }[] }).ips[0]?.address.split('/')[0] as string;
    const made: TestPod = { name: 'new', netns, address, hostInterface: hostInterfaceName('cali', `${NAMESPACE}.new`) };
    // Nothing waited for: as the ADD answers, its file is there and its chains know its address.
    t.notRegex(added.stderr, /did not report the pod's policy programmed/);
    t.true(existsSync(fileOf(made)), 'the status file is written before the ADD answers');
    t.true(dispatched().includes(made.hostInterface));
    t.true(await reaches(made, a), 'it connects out: its own address is known before the kubelet writes it');
    made.listener = echoListener(shared, made.netns);
    pods.set('new', made);
    await until('the listener in the new pod', () => inNs(netns, ['sh', '-c', `ss -ltn | grep -q :${PORT}`]).status === 0);
    t.false(connects(a, made), 'its ingress is denied');
    await networking.deleteNamespacedNetworkPolicy({ namespace: NAMESPACE, name: 'deny-new' });
    t.true(await settles(a, made, true), 'and opens when the policy goes: the networking itself works');
  },
);

test.serial('a stopped agent leaves the table: a → b stays blocked and an established connection lives on across a restart', async (t) => {
  const [a, b] = [pods.get('a') as TestPod, pods.get('b') as TestPod];
  // A connection a → b opened while the allow policy is there, kept open, echoing each line sent.
  const client = spawn(
    'ip',
    [
      'netns',
      'exec',
      a.netns.name,
      process.execPath,
      '-e',
      `const s = require('node:net').connect(${PORT}, '${b.address}'); s.on('error', () => process.exit(1));
       s.on('connect', () => process.stdout.write('connected\\n')); s.pipe(process.stdout); process.stdin.on('data', (d) => s.write(d));`,
    ],
    { stdio: ['pipe', 'pipe', 'ignore'] },
  );
  shared.teardown(() => client.kill('SIGKILL'));
  let echoed = '';
  client.stdout?.setEncoding('utf8').on('data', (text: string) => {
    echoed += text;
  });
  const roundTrip = async (word: string) => {
    client.stdin?.write(`${word}\n`);
    await until(`the established connection echoes ${word}`, () => echoed.includes(`${word}\n`), 20_000);
    return true;
  };
  await until('the long connection is open', () => echoed.includes('connected'));
  t.true(await roundTrip('one'));
  await networking.deleteNamespacedNetworkPolicy({ namespace: NAMESPACE, name: 'a-to-b' });
  t.true(await settles(a, b, false));
  t.true(await roundTrip('two'), 'established connections survive a policy change');

  t.is(await stopAgent(), 0);
  t.is(nftList().status, 0, 'the table stays');
  t.false(connects(a, b), 'a → b stays blocked while the agent is away');
  t.true(await reaches(b, a));
  t.true(await roundTrip('three'));

  const logged = policyNode.log().length;
  startAgent();
  await until('the agent is ready again', () => agentGet('/readyz').status === 200, 90_000);
  // Its first write's line, read as the pipe delivers it: the agent may be ready before this process has read it.
  const firstWrite = await eventually('the restart logs its first write', () =>
    /table inet netplug (taken over as the previous run kept it|written whole)/.exec(policyNode.log().slice(logged)),
  );
  t.is(firstWrite[1], 'taken over as the previous run kept it', 'the restart wrote no whole table');
  t.false(connects(a, b));
  t.true(await roundTrip('four'), 'the established connection lived through the restart');
  t.true(existsSync(fileOf(a)) && existsSync(fileOf(b)));
  client.kill('SIGKILL');
});

// A Log rule's packets in the agent's log; what was denied, on /metrics (policy-observed.ts).
observedPolicy(test, () => ({ policyNode, namespace: NAMESPACE, shared, a: pods.get('a') as TestPod, b: pods.get('b') as TestPod, until }));
