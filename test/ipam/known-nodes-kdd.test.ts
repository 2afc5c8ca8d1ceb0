// The agent's knowledge on the Kubernetes datastore (a real kube-apiserver with netplug's CRDs):
// the core run in-process as netplug-node runs it, with a second writer (the core without the
// agent's knowledge, as a one-shot runs) changing the node's block and the pools behind its back.
// Each change is caught: no address twice, no disabled pool used.
import test, { type ExecutionContext } from 'ava';

import { KnownNodes } from '../../ts/ipam/known-nodes.ts';
import { keys } from '../../ts/model/keys.ts';
import { checkedBlock } from '../../ts/model/checked-documents.ts';
import { poolResource } from '../../ts/model/pool-resource.ts';
import { nodeTurns } from '../../ts/node/cni/cni-services.ts';
import { runMain } from '../../ts/plugin/main.ts';
import type { PluginServices } from '../../ts/plugin/services.ts';
import { openStore } from '../../ts/store/open.ts';
import type { Store } from '../../ts/store/store.ts';
import { containerId, createNetns } from '../helpers/kernel.ts';
import { installCrds, startKube } from '../helpers/kube.ts';

const NODE = 'node-known-kdd';

/** netplug-ipam's ADD through the core, as `services` serve it, of a new container on `node`; resolves to its address. */
function adder(t: ExecutionContext, kubeconfig: string, node: string, network: string) {
  const netns = createNetns(t, network).path;
  const netconf = {
    cniVersion: '1.1.0',
    name: network,
    type: 'netplug',
    nodename: node,
    datastore_type: 'kubernetes',
    kubernetes: { kubeconfig },
    ipam: { type: 'netplug-ipam' },
  };
  return async (services: PluginServices) => {
    const env = { CNI_COMMAND: 'ADD', CNI_CONTAINERID: containerId(), CNI_NETNS: netns, CNI_IFNAME: 'eth0', CNI_PATH: '/usr/lib/cni' };
    const io = { env, readStdin: () => Buffer.from(JSON.stringify(netconf)), stderr: () => undefined, pid: process.pid };
    const outcome = await runMain(io, 'netplug-ipam', services);
    t.is(outcome.exitCode, 0, outcome.stdout);
    return String(JSON.parse(outcome.stdout).ips[0].address).split('/')[0] ?? '';
  };
}

test('on the Kubernetes datastore too, what the agent knows is checked by its commit: another writer and a disabled pool are caught', async (t) => {
  const kube = await startKube(t);
  await installCrds(kube);
  await kube.core.createNode({ body: { metadata: { name: NODE } } });
  const kubeconfig = kube.server.admin.kubeconfig;
  const store = await openStore({ datastore_type: 'kubernetes', kubernetes: { kubeconfig } });
  t.teardown(() => store.close());
  const shared = new Proxy(store, { get: (target, p) => (p === 'close' ? () => undefined : Reflect.get(target, p, target)) }) as Store;
  await store.commit([{ key: keys.pool('kdd-old'), create: poolResource('kdd-old', { cidr: '10.76.0.0/16' }, new Date()) }]);
  const known = new KnownNodes();
  const agent: PluginServices = {
    via: 'netplug-node',
    store: () => Promise.resolve(shared),
    ipamTurns: nodeTurns(),
    knownNodes: () => known,
  };
  const other: PluginServices = { via: 'one-shot', store: () => Promise.resolve(shared), ipamTurns: nodeTurns() };
  const add = adder(t, kubeconfig, NODE, 'known-kdd');
  const allocated = async () =>
    (await store.list(keys.blocks(4))).map(checkedBlock).reduce((n, b) => n + b.value.allocations.filter((a) => a !== null).length, 0);

  const addresses = [await add(agent), await add(agent)];
  t.truthy(known.fresh(NODE), 'the agent knows its node');
  addresses.push(await add(other), await add(agent), await add(other), await add(agent));
  t.is(new Set(addresses).size, 6, `no address twice: ${addresses.join(', ')}`);
  t.is(await allocated(), 6);

  // Behind the agent's back: a new pool, the old one disabled.
  await store.commit([{ key: keys.pool('kdd-new'), create: poolResource('kdd-new', { cidr: '10.77.0.0/16' }, new Date()) }]);
  const old = await store.get(keys.pool('kdd-old'));
  const disabled = poolResource('kdd-old', { cidr: '10.76.0.0/16', disabled: true }, new Date());
  t.true(await store.commit([{ key: keys.pool('kdd-old'), update: disabled, revision: old?.revision ?? '' }]));
  t.regex(await add(agent), /^10\.77\./, 'the disabled pool was not used');
});

test('a burst of ADDs on a node whose facts went stale reads them once, not once per ADD, and no address is given twice', async (t) => {
  const kube = await startKube(t);
  await installCrds(kube);
  const node = `${NODE}-burst`;
  await kube.core.createNode({ body: { metadata: { name: node } } });
  const kubeconfig = kube.server.admin.kubeconfig;
  const store = await openStore({ datastore_type: 'kubernetes', kubernetes: { kubeconfig } });
  t.teardown(() => store.close());
  await store.commit([{ key: keys.pool('kdd-burst'), create: poolResource('kdd-burst', { cidr: '10.78.0.0/16' }, new Date()) }]);
  // The facts' reads: each lists the pools first (read-ahead.ts addReads).
  let factsReads = 0;
  const shared = new Proxy(store, {
    get(target, property) {
      const value = Reflect.get(target, property, target);
      if (property === 'close') return () => undefined;
      if (property !== 'read') return typeof value === 'function' ? value.bind(target) : value;
      return (reads: { list?: string }[]) => {
        if (reads.some((read) => read.list === keys.pools)) factsReads++;
        return value.call(target, reads);
      };
    },
  }) as Store;
  let clock = 0;
  const known = new KnownNodes(() => clock);
  const agent: PluginServices = {
    via: 'netplug-node',
    store: () => Promise.resolve(shared),
    ipamTurns: nodeTurns(),
    knownNodes: () => known,
  };
  const addThrough = adder(t, kubeconfig, node, 'known-burst');
  const add = () => addThrough(agent);

  const first = await add();
  t.truthy(known.fresh(node), 'the first ADD read the facts and claimed a block');
  clock += 60_000;
  t.is(known.fresh(node), undefined, 'a minute later they are stale (no watch on this datastore)');
  factsReads = 0;
  const burst = await Promise.all(Array.from({ length: 12 }, () => add()));
  t.is(factsReads, 1, 'one read of the facts for the 12 ADDs');
  t.is(new Set([first, ...burst]).size, 13, `no address twice: ${[first, ...burst].join(', ')}`);
});
