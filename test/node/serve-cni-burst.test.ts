// 100 concurrent ADDs on one node through netplug-node, then 100 DELs, on both datastores, with a
// one-shot ADD and DEL running beside them: every pod networked with an address of its own, and
// nothing left after the DELs. The one-shot and the agent share nothing but the datastore, whose
// compare-and-swap keeps an address from being handed out twice.
import test, { type ExecutionContext } from 'ava';

import { keys } from '../../ts/model/keys.ts';
import { openStore } from '../../ts/store/open.ts';
import type { Store } from '../../ts/store/store.ts';
import { callAgent, type AgentReply } from '../helpers/agent-client.ts';
import { agentMetric, ONE_SHOT, spawnAgent, type AgentProcess } from '../helpers/agent-server.ts';
import { hostVeth } from '../helpers/cni.ts';
import { startEtcd } from '../helpers/etcd.ts';
import { addressesOf, invokeAsync, ipamNetconf } from '../helpers/ipam.ts';
import { addresses, containerId, createNetns, link } from '../helpers/kernel.ts';
import { DATASTORE_RULES, installCrds, PLUGIN_RULES, removeIpamLockFileAfter, startKube } from '../helpers/kube.ts';
import { NODE_AGENT_DATASTORE_RULES, NODE_AGENT_RULES } from './agent.ts';

const BURST = 100;

async function burst(t: ExecutionContext, agent: AgentProcess, netconf: Record<string, unknown>, store: Store, prefix: string) {
  const { socket } = agent;
  const handles = () => store.listKeys(`/netplug/ipam/v2/handle/${prefix}.`);
  const pods = Array.from({ length: BURST + 1 }, () => ({ containerId: containerId(), netns: createNetns(t, 'burst'), netconf }));
  const oneShotPod = pods[BURST] as (typeof pods)[number];
  const agentPods = pods.slice(0, BURST);
  const call = (p: (typeof pods)[number]) => ({ containerId: p.containerId, netns: p.netns.path, netconf: p.netconf });

  const started = Date.now();
  const [adds, oneShotAdd] = await Promise.all([
    Promise.all(agentPods.map((p) => callAgent(socket, { ...call(p), command: 'ADD' }))),
    invokeAsync({ ...call(oneShotPod), command: 'ADD', executable: ONE_SHOT }),
  ]);
  t.log(`${BURST} ADDs through the agent (and one one-shot beside them): ${(Date.now() - started) / 1000} s`);
  const failed = (replies: AgentReply[]) => replies.filter((r) => !r.accepted || r.exitCode !== 0).map((r) => r.stdout ?? 'declined');
  // Why the agent declined (its log names each reason once, then counts it): a failure says it.
  if (failed(adds).length > 0)
    t.log(
      agent
        .output()
        .split('\n')
        .filter((line) => /declined|WARNING|ERROR/.test(line))
        .join('\n'),
    );
  t.deepEqual(failed(adds), [], 'every ADD served and successful');
  t.is(oneShotAdd.status, 0, oneShotAdd.stdout);
  const assigned = [...adds.map((a) => addressesOf(a.json)[0]), addressesOf(oneShotAdd.json)[0]];
  t.is(new Set(assigned).size, BURST + 1, 'an address of its own each');
  for (const [i, p] of pods.entries()) t.true(addresses('eth0', p.netns).includes(`${assigned[i]}/32`), `pod ${i} networked`);
  t.is((await handles()).length, BURST + 1);
  t.is((await store.listKeys(keys.workloadEndpoints)).length, BURST + 1, 'a workload endpoint each');
  const together = await agentMetric(agent, 'netplug_ipam_adds_served_together_total');
  t.log(`ADDs served by another's commit (a group commit): ${together}`);
  t.true(together > 0, 'waiting ADDs were served together');

  const deleted = Date.now();
  const [dels, oneShotDel] = await Promise.all([
    Promise.all(agentPods.map((p) => callAgent(socket, { ...call(p), command: 'DEL' }))),
    invokeAsync({ ...call(oneShotPod), command: 'DEL', executable: ONE_SHOT }),
  ]);
  t.log(`${BURST} DELs: ${(Date.now() - deleted) / 1000} s`);
  t.deepEqual(failed(dels), []);
  t.is(oneShotDel.status, 0, oneShotDel.stdout);
  for (const p of pods) {
    t.is(link('eth0', p.netns), undefined);
    t.is(link(hostVeth(p.containerId)), undefined);
  }
  t.deepEqual(await handles(), [], 'every address released');
}

test('etcd: 100 concurrent ADDs and DELs on one node through the agent, a one-shot beside them', async (t) => {
  t.timeout(10 * 60_000);
  const [kube, etcd] = await Promise.all([startKube(t), startEtcd(t)]);
  const node = 'node-burst';
  const agent = await spawnAgent(t, {
    NODENAME: node,
    DATASTORE_TYPE: 'etcdv3',
    ETCD_ENDPOINTS: etcd.endpoints,
    KUBECONFIG: (await kube.identityWith('netplug-node-burst', NODE_AGENT_RULES)).kubeconfig,
    NETPLUG_IPV4POOL_CIDR: '10.223.0.0/16',
    NETPLUG_NETWORKING_BACKEND: 'none',
  });
  const store = await openStore({ etcd_endpoints: etcd.endpoints });
  t.teardown(() => store.close());
  await burst(t, agent, ipamNetconf(etcd, { node, name: 'burst' }), store, 'burst');
});

test('Kubernetes datastore: 100 concurrent ADDs and DELs on one node through the agent, a one-shot beside them', async (t) => {
  t.timeout(10 * 60_000);
  removeIpamLockFileAfter(t);
  const kube = await startKube(t);
  await installCrds(kube);
  const node = 'node-burst-kdd';
  await kube.core.createNode({ body: { metadata: { name: node } } });
  const pluginKubeconfig = (await kube.identityWith('netplug-cni-burst', [...PLUGIN_RULES, ...DATASTORE_RULES])).kubeconfig;
  const agent = await spawnAgent(t, {
    NODENAME: node,
    DATASTORE_TYPE: 'kubernetes',
    KUBECONFIG: (
      await kube.identityWith('netplug-node-burst-kdd', [
        ...NODE_AGENT_RULES,
        ...NODE_AGENT_DATASTORE_RULES,
        ...PLUGIN_RULES,
        ...DATASTORE_RULES,
      ])
    ).kubeconfig,
    NETPLUG_IPV4POOL_CIDR: '10.224.0.0/16',
    NETPLUG_NETWORKING_BACKEND: 'none',
  });
  const store = await openStore({ datastore_type: 'kubernetes', kubernetes: { kubeconfig: kube.server.admin.kubeconfig } });
  t.teardown(() => store.close());
  const netconf = {
    cniVersion: '1.1.0',
    name: 'burstkdd',
    type: 'netplug',
    nodename: node,
    datastore_type: 'kubernetes',
    kubernetes: { kubeconfig: pluginKubeconfig },
    ipam: { type: 'netplug-ipam' },
  };
  await burst(t, agent, netconf, store, 'burstkdd');
});
