// netplug-node killed with SIGKILL while ADDs are in flight, then started again on the same socket
// and journal: every ADD whose client got a result is networked with its address; every other one
// left nothing (no interface, no host veth, no address held), since the agent rolls back each ADD
// its journal says did not finish before it serves again; no address is held twice.
import { existsSync, readdirSync } from 'node:fs';
import { dirname, join } from 'node:path';

import test from 'ava';

import { callAgent, type AgentReply } from '../helpers/agent-client.ts';
import { spawnAgent } from '../helpers/agent-server.ts';
import { hostVeth } from '../helpers/cni.ts';
import { startEtcd } from '../helpers/etcd.ts';
import { addressesOf, ipamNetconf } from '../helpers/ipam.ts';
import { addresses, containerId, createNetns, link } from '../helpers/kernel.ts';
import { startKube } from '../helpers/kube.ts';
import { openStore } from '../../ts/store/open.ts';
import { NODE_AGENT_RULES } from './agent.ts';

const PODS = 40;

test('kill -9 with ADDs in flight: after the restart, the finished ones are networked, the others left nothing', async (t) => {
  t.timeout(10 * 60_000);
  const [kube, etcd] = await Promise.all([startKube(t), startEtcd(t)]);
  const node = 'node-crash';
  const env = {
    NODENAME: node,
    DATASTORE_TYPE: 'etcdv3',
    ETCD_ENDPOINTS: etcd.endpoints,
    KUBECONFIG: (await kube.identityWith('netplug-node-crash', NODE_AGENT_RULES)).kubeconfig,
    NETPLUG_IPV4POOL_CIDR: '10.225.0.0/16',
    NETPLUG_NETWORKING_BACKEND: 'none',
  };
  const store = await openStore({ etcd_endpoints: etcd.endpoints });
  t.teardown(() => store.close());
  const netconf = ipamNetconf(etcd, { node, name: 'crash' });

  const first = await spawnAgent(t, env);
  const pods = Array.from({ length: PODS }, () => ({ containerId: containerId(), netns: createNetns(t, 'crash') }));
  let answered = 0;
  let killed: Promise<void> | undefined;
  const replies: AgentReply[] = await Promise.all(
    pods.map(async (p) => {
      const reply = await callAgent(first.socket, { command: 'ADD', containerId: p.containerId, netns: p.netns.path, netconf });
      // The first result in: the others are being served, or waiting for their turn.
      if (reply.exitCode === 0 && ++answered === 1) killed = first.kill();
      return reply;
    }),
  );
  await killed;
  const succeeded = pods.filter((_, i) => replies[i]?.exitCode === 0);
  const unfinished = pods.filter((_, i) => replies[i]?.exitCode !== 0);
  t.log(`${succeeded.length} ADDs finished before the kill, ${unfinished.length} did not`);
  t.true(unfinished.length > 0, 'some ADDs were cut off');
  for (const [i, reply] of replies.entries()) if (reply.exitCode !== 0) t.is(reply.stdout, undefined, `ADD ${i} got no result`);

  const second = await spawnAgent(t, env, { dir: first.dir });
  const inflight = join(dirname(second.socket), 'inflight');
  t.deepEqual(existsSync(inflight) ? readdirSync(inflight) : [], [], 'every unfinished ADD rolled back');
  t.log(
    second
      .output()
      .split('\n')
      .filter((line) => line.includes('rolling back') || line.includes('rolled back')).length,
    'roll-back lines',
  );

  const held = await store.listKeys('/netplug/ipam/v2/handle/crash.');
  t.deepEqual(
    held.sort(),
    succeeded.map((p) => `/netplug/ipam/v2/handle/crash.${p.containerId}`).sort(),
    'addresses held by finished ADDs only',
  );
  const assigned = succeeded.map((p) => addressesOf(replies[pods.indexOf(p)]?.json)[0]);
  t.is(new Set(assigned).size, succeeded.length, 'no address twice');
  for (const [i, p] of succeeded.entries()) t.true(addresses('eth0', p.netns).includes(`${assigned[i]}/32`), 'networked');
  for (const p of unfinished) {
    t.is(link('eth0', p.netns), undefined, 'no interface in the pod');
    t.is(link(hostVeth(p.containerId)), undefined, 'no host veth');
  }

  // What the runtime does next: DEL the failed ones (nothing to do) and, later, the others.
  for (const p of pods) {
    const del = await callAgent(second.socket, { command: 'DEL', containerId: p.containerId, netns: p.netns.path, netconf });
    t.is(del.exitCode, 0, del.stdout);
  }
  t.deepEqual(await store.listKeys('/netplug/ipam/v2/handle/crash.'), []);
});
