// A pod's DEL served by netplug-node (CNI_ARGS names the pod, as the kubelet's does) answers once
// the attachment's host routes are gone and its addresses released, while the kernel is still
// deleting the veth: the address it frees must be usable at once by another pod, a next call in
// the same namespace must find the interface gone, and the agent must finish the deletions before
// it stops. Any other caller's DEL answers once the interface is gone.
import test from 'ava';

import { callAgent } from '../helpers/agent-client.ts';
import { spawnAgent } from '../helpers/agent-server.ts';
import { startEtcd, type EtcdServer } from '../helpers/etcd.ts';
import { addressesOf, ipamNetconf } from '../helpers/ipam.ts';
import { addresses, containerId, createNetns, ip, link, ping, type TestNetns } from '../helpers/kernel.ts';
import { startKube, type Kube } from '../helpers/kube.ts';
import { sharedTeardowns } from '../helpers/shared.ts';
import { NODE_AGENT_RULES } from './agent.ts';

const POOL = '10.223.0.0/16';
const NODE = 'node-reuse';
const ROUNDS = 50;

let kube: Kube;
let etcd: EtcdServer;
let agentEnv: Record<string, string>;
const shared = sharedTeardowns(test);

test.before(async () => {
  kube = await startKube(shared);
  etcd = await startEtcd(shared);
  agentEnv = {
    NODENAME: NODE,
    DATASTORE_TYPE: 'etcdv3',
    ETCD_ENDPOINTS: etcd.endpoints,
    KUBECONFIG: (await kube.identityWith('netplug-node-reuse', NODE_AGENT_RULES)).kubeconfig,
    NETPLUG_IPV4POOL_CIDR: POOL,
    NETPLUG_NETWORKING_BACKEND: 'none',
  };
});

/** A pod's call as the kubelet makes it: the pod's names in CNI_ARGS (then `extra`). */
function call(pod: { containerId: string; netns: TestNetns; name: string }, extra = '') {
  const args = `IgnoreUnknown=1;K8S_POD_NAMESPACE=reuse;K8S_POD_NAME=${pod.name};K8S_POD_INFRA_CONTAINER_ID=${pod.containerId}${extra}`;
  return { containerId: pod.containerId, netns: pod.netns.path, args };
}

test.serial(
  `an address a DEL released is another pod's at once, ${ROUNDS} times in a row; the agent stops only once the veths are gone`,
  async (t) => {
    const agent = await spawnAgent(t, agentEnv);
    const netconf = ipamNetconf(etcd, { node: NODE, name: 'reuse' });
    let pod = { containerId: containerId(), netns: createNetns(t, 'reuse'), name: 'web-0' };
    const first = await callAgent(agent.socket, { command: 'ADD', ...call(pod), netconf });
    t.is(first.exitCode, 0, first.stdout);
    const [address] = addressesOf(first.json);
    if (!address) throw new Error(`no address in ${first.stdout}`);
    // Each round: the pod holding the address is deleted, and a new pod asks for that very address
    // (CNI_ARGS IP) right after the DEL's answer, the old veth most likely still being deleted.
    const ip4 = `;IP=${address}`;
    let answeredBeforeTheKernel = 0;
    for (let round = 0; round < ROUNDS; round++) {
      const del = await callAgent(agent.socket, { command: 'DEL', ...call(pod, ip4), netconf });
      t.is(del.exitCode, 0, `round ${round}: DEL: ${del.stdout}`);
      if (/workload interface being removed/.test(del.stderr ?? '')) answeredBeforeTheKernel++;
      const next = { containerId: containerId(), netns: createNetns(t, 'reuse'), name: `web-${round + 1}` };
      const add = await callAgent(agent.socket, { command: 'ADD', ...call(next, ip4), netconf });
      if (add.exitCode !== 0) return t.fail(`round ${round}: ADD of the released ${address}: ${add.stdout}${add.stderr}`);
      t.deepEqual(addressesOf(add.json), [address]);
      t.true(addresses('eth0', next.netns).includes(`${address}/32`));
      // One host route to it, and it leads to the new pod.
      t.is(
        ip(['-4', 'route', 'show', `${address}/32`])
          .trim()
          .split('\n').length,
        1,
        `round ${round}: one host route`,
      );
      if (!ping(address)) return t.fail(`round ${round}: ${address} does not answer in its new pod`);
      pod = next;
    }
    t.log(`${answeredBeforeTheKernel} of ${ROUNDS} DELs answered while the kernel was still deleting the veth`);
    const last = await callAgent(agent.socket, { command: 'DEL', ...call(pod, ip4), netconf });
    t.is(last.exitCode, 0, last.stdout);
    // Stopped right after its answer: the agent waits for the veth's deletion before it exits.
    t.is(await agent.stop(), 0, agent.output());
    t.is(link('eth0', pod.netns), undefined);
    t.is(ip(['-4', 'route', 'show', `${address}/32`]).trim(), '');
    t.notRegex(agent.output(), /ERROR/);
  },
);

test.serial(
  `a pod's DEL then its ADD again in the same namespace, ${ROUNDS} times in a row: each ADD finds the interface gone`,
  async (t) => {
    const agent = await spawnAgent(t, agentEnv);
    const netconf = ipamNetconf(etcd, { node: NODE, name: 'again' });
    const pod = { containerId: containerId(), netns: createNetns(t, 'again'), name: 'db-0' };
    let answeredBeforeTheKernel = 0;
    for (let round = 0; round < ROUNDS; round++) {
      const add = await callAgent(agent.socket, { command: 'ADD', ...call(pod), netconf });
      if (add.exitCode !== 0) return t.fail(`round ${round}: ADD after the DEL: ${add.stdout}${add.stderr}`);
      const del = await callAgent(agent.socket, { command: 'DEL', ...call(pod), netconf });
      t.is(del.exitCode, 0, `round ${round}: DEL: ${del.stdout}`);
      if (/workload interface being removed/.test(del.stderr ?? '')) answeredBeforeTheKernel++;
    }
    t.log(`${answeredBeforeTheKernel} of ${ROUNDS} DELs answered while the kernel was still deleting the veth`);
    t.is(await agent.stop(), 0, agent.output());
    t.is(link('eth0', pod.netns), undefined);
    t.notRegex(agent.output(), /ERROR/);
  },
);

test.serial(
  `a DEL that names no pod (cnitool, podman) answers once the interface and its host end are gone, ${ROUNDS} times`,
  async (t) => {
    const agent = await spawnAgent(t, agentEnv);
    const netconf = ipamNetconf(etcd, { node: NODE, name: 'plain' });
    for (let round = 0; round < ROUNDS; round++) {
      const id = containerId();
      const netns = createNetns(t, 'plain');
      const add = await callAgent(agent.socket, { command: 'ADD', containerId: id, netns: netns.path, netconf });
      t.is(add.exitCode, 0, add.stdout);
      const host = String((add.json as { interfaces: Array<{ name: string }> }).interfaces[0]?.name);
      const del = await callAgent(agent.socket, { command: 'DEL', containerId: id, netns: netns.path, netconf });
      t.is(del.exitCode, 0, del.stdout);
      t.notRegex(del.stderr ?? '', /workload interface being removed/, 'not handed over behind the answer');
      if (link('eth0', netns) !== undefined || link(host) !== undefined)
        return t.fail(`round ${round}: the veth outlived its DEL's answer`);
    }
    t.is(await agent.stop(), 0, agent.output());
  },
);
