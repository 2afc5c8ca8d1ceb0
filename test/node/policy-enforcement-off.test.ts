// Turning enforcement off on a node that had it on: the restarted agent, with no other part of
// netplug's table (no routes, so no NAT), deletes the table the previous run left and the endpoint
// status files it wrote, and traffic a policy blocked flows again. Real packets between two pod
// namespaces plugged into one node, Pod objects in a real kube-apiserver (policy-node.ts).
import { spawn } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';

import test from 'ava';

import { hostInterfaceName } from '../../ts/dataplane/index.ts';
import { statusFileName } from '../../ts/plugin/policy-wait.ts';
import { eventually } from '../helpers/eventually.ts';
import type { Netns } from '../helpers/nodes.ts';
import { sharedTeardowns } from '../helpers/shared.ts';
import { connectsTo, createRunningPod, plugNetns, startPolicyNode, type PolicyNode } from './policy-node.ts';

const NAMESPACE = `policy-off-${process.pid}`;
const PORT = 8080;
const shared = sharedTeardowns(test);
let policyNode: PolicyNode;

interface TestPod {
  name: string;
  netns: Netns;
  address: string;
}

const until = (what: string, check: () => boolean | Promise<boolean>, timeoutMs = 60_000) =>
  eventually(what, check, { timeoutMs, context: () => policyNode.log().split('\n').slice(-30).join('\n') });

async function plugPod(name: string, address: string, labels: Record<string, string>): Promise<TestPod> {
  const { node, kube } = policyNode;
  const netns = plugNetns(shared, node, `npoff-${name}-${process.pid}`, address, hostInterfaceName('cali', `${NAMESPACE}.${name}`));
  await createRunningPod(kube, { namespace: NAMESPACE, name, labels, nodeName: node.name, addresses: [address] });
  const script = `require('node:net').createServer((s) => { s.on('error', () => {}); s.pipe(s); }).listen(${PORT}, '0.0.0.0')`;
  const listener = spawn('ip', ['netns', 'exec', netns.name, process.execPath, '-e', script], { stdio: 'ignore' });
  shared.teardown(() => listener.kill('SIGKILL'));
  return { name, netns, address };
}

const connects = (from: TestPod, to: TestPod) => connectsTo(from.netns, to.address, PORT);

const fileOf = (pod: TestPod) => join(policyNode.statusDir, statusFileName('k8s', NAMESPACE, pod.name, 'eth0'));

test.before(async () => {
  policyNode = await startPolicyNode(shared, 'pnoff');
  await policyNode.kube.core.createNamespace({ body: { metadata: { name: NAMESPACE } } });
  shared.teardown(() => policyNode.kube.core.deleteNamespace({ name: NAMESPACE }).catch(() => undefined));
});

test.afterEach.always((t) => {
  if (!t.passed) t.log(policyNode.log().split('\n').slice(-40).join('\n'));
});

test.serial(
  'enforcement turned off: the restarted agent deletes table inet netplug and the status files; blocked traffic flows',
  async (t) => {
    const a = await plugPod('a', '10.79.0.10', { app: 'a' });
    const b = await plugPod('b', '10.79.0.11', { app: 'b' });
    await policyNode.networking.createNamespacedNetworkPolicy({
      namespace: NAMESPACE,
      body: { metadata: { name: 'deny-b' }, spec: { podSelector: { matchLabels: { app: 'b' } }, policyTypes: ['Ingress'] } },
    });
    policyNode.startAgent();
    await until('both status files', () => existsSync(fileOf(a)) && existsSync(fileOf(b)), 90_000);
    await until('a → b blocked', () => !connects(a, b));
    t.true(connects(b, a));
    t.is(policyNode.nftList().status, 0, 'the table is there');

    t.is(await policyNode.stopAgent(), 0);
    policyNode.agentEnv['NETPLUG_POLICY_ENFORCEMENT'] = 'false';
    policyNode.startAgent();
    await until('the table gone', () => policyNode.nftList().status !== 0);
    await until('the status files gone', () => readdirSync(policyNode.statusDir).length === 0);
    t.true(connects(a, b), 'a → b flows without netplug policy');
    t.true(connects(b, a));
    // Its log says what it deleted and why (read as the pipe delivers it).
    await until('the log of the deletions', () =>
      /deleted nftables table inet netplug: no part of the agent writes it[\s\S]*deleted 2 endpoint status files: policy enforcement is off/.test(
        policyNode.log(),
      ),
    );
  },
);
