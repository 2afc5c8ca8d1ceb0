// Policy rules follow the families the cluster's addresses have, proved with real packets: on a
// node whose pods have IPv4 addresses only, rules naming peers by selector are written for IPv4
// alone; once the pods' objects carry IPv6 addresses too, every policy is written for both, and a
// NetworkPolicy allowing a podSelector lets its pods in over IPv6 and keeps the others out. One
// "node" running netplug-node from source (policy-node.ts); pods are network namespaces plugged
// into it with an IPv4 and an IPv6 address each (the IPv6 one reaches the node through fe80::1, as
// the plugin's gateway), each serving a TCP echo on both families. Everything goes at the end.
import { spawn } from 'node:child_process';

import test from 'ava';
import type * as k8s from '@kubernetes/client-node';

import { hostInterfaceName } from '../../ts/dataplane/index.ts';
import { eventually } from '../helpers/eventually.ts';
import type { Kube } from '../helpers/kube.ts';
import type { Netns, TestNode } from '../helpers/nodes.ts';
import { sharedTeardowns } from '../helpers/shared.ts';
import { ECHO_PORT, createRunningPod, plugNetns, settles, sh, startPolicyNode, type PolicyNode } from './policy-node.ts';

const NAMESPACE = `policy6-${process.pid}`;
const shared = sharedTeardowns(test);

let policyNode: PolicyNode;
let kube: Kube;
let node: TestNode;

interface DualPod {
  name: string;
  labels: Record<string, string>;
  netns: Netns;
  ipv4: string;
  ipv6: string;
}
const pods: DualPod[] = [];

/** A pod plugged with both addresses (its Pod object names only the IPv4 one), serving an echo on both families. */
async function plugDualPod(name: string, n: number, labels: Record<string, string>): Promise<DualPod> {
  const [ipv4, ipv6] = [`10.76.0.${n}`, `fd00:76::${n}`];
  const host = hostInterfaceName('cali', `${NAMESPACE}.${name}`);
  const netns = plugNetns(shared, node, `nppol6-${name}-${process.pid}`, ipv4, host);
  sh(
    netns,
    `ip -6 addr add ${ipv6}/128 dev eth0 nodad
     ip -6 route add fe80::1 dev eth0; ip -6 route add default via fe80::1 dev eth0`,
  );
  sh(node.netns, `ip -6 addr add fe80::1/64 dev ${host} nodad; ip -6 route add ${ipv6}/128 dev ${host}`);
  const script = `require('node:net').createServer((s) => { s.on('error', () => {}); s.pipe(s); }).listen(${ECHO_PORT}, '::')`;
  const listener = spawn('ip', ['netns', 'exec', netns.name, process.execPath, '-e', script], { stdio: 'ignore' });
  shared.teardown(() => listener.kill('SIGKILL'));
  await createRunningPod(kube, { namespace: NAMESPACE, name, labels, nodeName: node.name, addresses: [ipv4] });
  const pod = { name, labels, netns, ipv4, ipv6 };
  pods.push(pod);
  return pod;
}

const over = (pod: DualPod, family: 4 | 6) => ({
  name: `${pod.name} (IPv${family})`,
  netns: pod.netns,
  address: family === 4 ? pod.ipv4 : pod.ipv6,
});
const ip6Rules = () => (policyNode.nftList().stdout ?? '').split('\n').filter((line) => /\bip6 saddr @/.test(line));

test.before(async () => {
  policyNode = await startPolicyNode(shared, 'pn6');
  ({ kube, node } = policyNode);
  sh(node.netns, 'sysctl -qw net.ipv6.conf.all.forwarding=1');
  await kube.core.createNamespace({ body: { metadata: { name: NAMESPACE } } });
  shared.teardown(() => kube.core.deleteNamespace({ name: NAMESPACE }).catch(() => undefined));
});

test.afterEach.always((t) => {
  if (!t.passed) t.log(policyNode.log().split('\n').slice(-40).join('\n'));
});

test.serial('with IPv4 addresses only, a policy allowing a podSelector is written for IPv4 alone', async (t) => {
  const server = await plugDualPod('server', 10, { app: 'server' });
  const client = await plugDualPod('client', 11, { app: 'client' });
  const other = await plugDualPod('other', 12, { app: 'other' });
  policyNode.startAgent();
  const networking: k8s.NetworkingV1Api = policyNode.networking;
  await networking.createNamespacedNetworkPolicy({
    namespace: NAMESPACE,
    body: {
      metadata: { name: 'server-from-client' },
      spec: {
        podSelector: { matchLabels: { app: 'server' } },
        ingress: [{ _from: [{ podSelector: { matchLabels: { app: 'client' } } }] }],
      },
    },
  });
  t.true(await settles(over(client, 4), over(server, 4), true));
  t.true(await settles(over(other, 4), over(server, 4), false));
  t.deepEqual(ip6Rules(), [], 'no rule matches IPv6 peers by selector');
  // The pods' IPv6 addresses are not theirs as the cluster knows them: what they send from them is dropped.
  t.true(await settles(over(client, 6), over(server, 6), false));
});

test.serial(
  'once the pods have IPv6 addresses the policy is written for both, and lets in over IPv6 only the pods it allows',
  async (t) => {
    const [server, client, other] = pods as [DualPod, DualPod, DualPod];
    for (const pod of pods) {
      const made = await kube.core.readNamespacedPod({ namespace: NAMESPACE, name: pod.name });
      made.status = { ...made.status, podIP: pod.ipv4, podIPs: [{ ip: pod.ipv4 }, { ip: pod.ipv6 }] };
      await kube.core.replaceNamespacedPodStatus({ namespace: NAMESPACE, name: pod.name, body: made });
    }
    await eventually('an IPv6 rule in the table', () => ip6Rules().length > 0, { timeoutMs: 60_000 });
    t.true(await settles(over(client, 6), over(server, 6), true));
    t.true(await settles(over(other, 6), over(server, 6), false));
    t.true(await settles(over(client, 4), over(server, 4), true));
    t.true(await settles(over(other, 4), over(server, 4), false));
    // The server's own connections, and their answers, flow on both families.
    t.true(await settles(over(server, 6), over(other, 6), true));
  },
);

test.serial('with the agent stopped, the table stays as written: IPv6 from the allowed pod only', async (t) => {
  const [server, client, other] = pods as [DualPod, DualPod, DualPod];
  await policyNode.stopAgent();
  t.true(await settles(over(client, 6), over(server, 6), true));
  t.true(await settles(over(other, 6), over(server, 6), false));
});
