// netplug-node killed with SIGKILL while ADDs are in flight, then started again on the same socket
// and journal, on etcd and on the Kubernetes datastore: every ADD whose client got a result is
// networked with its address; every other one left nothing (no interface, no host veth, no address
// held), since the agent rolls back each ADD its journal says did not finish before it serves
// again; no address is held twice.
import { dirname, join } from 'node:path';

import test, { type ExecutionContext } from 'ava';

import { InflightJournal } from '../../ts/node/cni/inflight-journal.ts';
import { openStore } from '../../ts/store/open.ts';
import type { Store } from '../../ts/store/store.ts';
import { callAgent, type AgentReply } from '../helpers/agent-client.ts';
import { spawnAgent } from '../helpers/agent-server.ts';
import { hostVeth, tempDir } from '../helpers/cni.ts';
import { startEtcd } from '../helpers/etcd.ts';
import { addressesOf, ipamNetconf } from '../helpers/ipam.ts';
import { addresses, containerId, createNetns, link } from '../helpers/kernel.ts';
import { DATASTORE_RULES, installCrds, PLUGIN_RULES, startKube } from '../helpers/kube.ts';
import { eventually } from '../helpers/eventually.ts';
import { kubeconfigThrough, type Relay, startRelay } from '../helpers/relay.ts';
import { NODE_AGENT_DATASTORE_RULES, NODE_AGENT_RULES } from './agent.ts';

const PODS = 40;
/** ADDs that finish before the kill; the others are in flight when it comes. */
const FINISHED = 8;

/**
 * Serves FINISHED ADDs, then holds the agent's datastore traffic (`wire`), starts the others, and
 * kills the agent once one of them has set its interface up ahead of its held commit; restarts it
 * on the same socket and journal, and judges what is left.
 *
 * `interfaceAhead`: on etcd the agent's watch keeps its facts current, so an ADD always plans
 * without a read and sets its interface up while its commit is held. On the Kubernetes datastore
 * the facts are used without a read for 5 s only (ts/ipam/known-nodes.ts): on a loaded machine
 * the held ADDs can come later and wait on their reads, with no interface made; the agent is then
 * killed with every ADD in flight, which must leave nothing all the same.
 */
async function crashAndRestart(
  t: ExecutionContext,
  env: Record<string, string>,
  netconf: Record<string, unknown>,
  store: Store,
  wire: Relay,
  interfaceAhead: 'always' | 'when the facts are fresh',
) {
  const handles = () => store.listKeys(`/netplug/ipam/v2/handle/${netconf['name']}.`);
  const first = await spawnAgent(t, env);
  const pods = Array.from({ length: PODS }, () => ({ containerId: containerId(), netns: createNetns(t, 'crash') }));
  const add = (p: (typeof pods)[number]) =>
    callAgent(first.socket, { command: 'ADD', containerId: p.containerId, netns: p.netns.path, netconf });
  const before = await Promise.all(pods.slice(0, FINISHED).map(add));
  wire.hold();
  const cutOff = pods.slice(FINISHED);
  const during = Promise.all(cutOff.map(add));
  const journal = join(dirname(first.socket), 'inflight');
  const wiredAhead = () => cutOff.some((p) => link(hostVeth(p.containerId)) !== undefined);
  if (interfaceAhead === 'always') {
    await eventually('an ADD has its interface set up while its commit is held', wiredAhead, { timeoutMs: 30_000 });
  } else {
    // Every ADD in flight, and then either one has its interface up or they all wait on a read.
    await eventually('the ADDs in the journal', () => new InflightJournal(journal).entries().length === cutOff.length, {
      timeoutMs: 30_000,
    });
    const ahead = await eventually('an ADD has its interface set up while its commit is held', wiredAhead, { timeoutMs: 3_000 }).then(
      () => true,
      () => false,
    );
    t.log(ahead ? 'an ADD had its interface set up ahead of its commit' : 'the ADDs waited on their reads (the facts had aged)');
  }
  t.not(new InflightJournal(journal).entries().length, 0, 'the journal holds the ADDs in flight');
  await first.kill();
  wire.cut();
  const replies: AgentReply[] = [...before, ...(await during)];
  const succeeded = pods.filter((_, i) => replies[i]?.exitCode === 0);
  const unfinished = pods.filter((_, i) => replies[i]?.exitCode !== 0);
  t.log(`${succeeded.length} ADDs finished before the kill, ${unfinished.length} did not`);
  t.deepEqual(succeeded, pods.slice(0, FINISHED), 'the ADDs before the hold finished, and only they');
  // Cut off by the kill, or (an ADD waiting on a read) an error: never a result.
  for (const [i, reply] of replies.entries())
    if (reply.exitCode !== 0 && reply.stdout !== undefined) t.is(typeof reply.json?.['code'], 'number', `ADD ${i} got no result`);

  const second = await spawnAgent(t, env, { dir: first.dir });
  const inflight = join(dirname(second.socket), 'inflight');
  t.deepEqual(new InflightJournal(inflight).entries(), [], 'every unfinished ADD rolled back');
  t.log(
    second
      .output()
      .split('\n')
      .find((line) => line.includes('rolling back')) ?? 'nothing to roll back',
  );

  const prefix = `/netplug/ipam/v2/handle/${netconf['name']}.`;
  t.deepEqual((await handles()).sort(), succeeded.map((p) => `${prefix}${p.containerId}`).sort(), 'addresses held by finished ADDs only');
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
  t.deepEqual(await handles(), []);
}

test('etcd: kill -9 with ADDs in flight; after the restart the finished ones are networked, the others left nothing', async (t) => {
  t.timeout(10 * 60_000);
  const [kube, etcd] = await Promise.all([startKube(t), startEtcd(t)]);
  const node = 'node-crash';
  const store = await openStore({ etcd_endpoints: etcd.endpoints });
  t.teardown(() => store.close());
  const wire = await startRelay(t, etcd.port);
  const relayed = `http://${wire.address}`;
  const env = {
    NODENAME: node,
    DATASTORE_TYPE: 'etcdv3',
    ETCD_ENDPOINTS: relayed,
    KUBECONFIG: (await kube.identityWith('netplug-node-crash', NODE_AGENT_RULES)).kubeconfig,
    NETPLUG_IPV4POOL_CIDR: '10.225.0.0/16',
    NETPLUG_NETWORKING_BACKEND: 'none',
  };
  await crashAndRestart(t, env, ipamNetconf(etcd, { node, name: 'crash', extra: { etcd_endpoints: relayed } }), store, wire, 'always');
});

test('Kubernetes datastore: kill -9 with ADDs in flight; after the restart the finished ones are networked, the others left nothing', async (t) => {
  t.timeout(10 * 60_000);
  const kube = await startKube(t);
  await installCrds(kube);
  const node = 'node-crash-kdd';
  await kube.core.createNode({ body: { metadata: { name: node } } });
  const store = await openStore({ datastore_type: 'kubernetes', kubernetes: { kubeconfig: kube.server.admin.kubeconfig } });
  t.teardown(() => store.close());
  const agentRules = [...NODE_AGENT_RULES, ...NODE_AGENT_DATASTORE_RULES, ...PLUGIN_RULES, ...DATASTORE_RULES];
  const wire = await startRelay(t, Number(new URL(kube.server.url).port));
  const dir = tempDir(t, 'relayed');
  // The same identity, through the relay.
  const relayed = (kubeconfig: string) => kubeconfigThrough(wire, kubeconfig, kube.server.url, dir);
  const env = {
    NODENAME: node,
    DATASTORE_TYPE: 'kubernetes',
    KUBECONFIG: relayed((await kube.identityWith('netplug-node-crash-kdd', agentRules)).kubeconfig),
    NETPLUG_IPV4POOL_CIDR: '10.229.0.0/16',
    NETPLUG_NETWORKING_BACKEND: 'none',
  };
  const netconf = {
    cniVersion: '1.1.0',
    name: 'crashkdd',
    type: 'netplug',
    nodename: node,
    datastore_type: 'kubernetes',
    kubernetes: { kubeconfig: relayed((await kube.identityWith('netplug-cni-crash', [...PLUGIN_RULES, ...DATASTORE_RULES])).kubeconfig) },
    ipam: { type: 'netplug-ipam' },
  };
  await crashAndRestart(t, env, netconf, store, wire, 'when the facts are fresh');
});
