// A resident agent's knowledge (ts/ipam/known-nodes.ts) spares reads, never exactness: the core run
// in-process as netplug-node runs it (runMain with the agent's services), on a real etcd, with a
// second writer changing what the agent knows behind its back. Every change is caught by the
// commit's conditions, and the command reads afresh: no address twice, no disabled pool used, no
// allocation while the datastore is locked.
import test, { type ExecutionContext } from 'ava';

import { parseEnvironment } from '../../ts/cni/environment.ts';
import { parseNetconf } from '../../ts/config/netconf.ts';
import { KnownNodes } from '../../ts/ipam/known-nodes.ts';
import { NetplugIpam } from '../../ts/ipam/netplug-ipam.ts';
import { handleId, keys } from '../../ts/model/keys.ts';
import { addReads, assumedAhead } from '../../ts/ipam/read-ahead.ts';
import { Logger } from '../../ts/log/logger.ts';
import { lockDatastore, unlockDatastore } from '../../ts/migrate/datastore-lock.ts';
import { nodeTurns } from '../../ts/node/cni/cni-services.ts';
import { runMain } from '../../ts/plugin/main.ts';
import type { PluginServices } from '../../ts/plugin/services.ts';
import { openStore } from '../../ts/store/open.ts';
import type { Store } from '../../ts/store/store.ts';
import { invoke } from '../helpers/cni.ts';
import { ctlOk, ipamNetconf, NETPLUG_IPAM, totalAllocated } from '../helpers/ipam.ts';
import { startEtcd } from '../helpers/etcd.ts';
import { containerId, createNetns } from '../helpers/kernel.ts';

const NODE = 'node-known';

/** The agent's store, counting its round trips: reads (get, list, read) and commits. */
function counted(store: Store) {
  const counts = { reads: 0, commits: 0 };
  const wrapped = new Proxy(store, {
    get(target, property) {
      const value = Reflect.get(target, property, target);
      if (property === 'close') return () => undefined;
      if (typeof value !== 'function') return value;
      return (...args: unknown[]) => {
        if (property === 'get' || property === 'list' || property === 'listKeys' || property === 'read') counts.reads++;
        if (property === 'commit' || property === 'commitElseRead') counts.commits++;
        return value.apply(target, args);
      };
    },
  });
  return { store: wrapped as Store, counts };
}

async function agentLike(t: ExecutionContext) {
  const etcd = await startEtcd(t);
  const opened = await openStore(etcd.netconf);
  t.teardown(() => opened.close());
  const { store, counts } = counted(opened);
  const known = new KnownNodes();
  const services: PluginServices = {
    via: 'netplug-node',
    store: () => Promise.resolve(store),
    ipamTurns: nodeTurns(),
    knownNodes: () => known,
  };
  const netns = createNetns(t, 'known').path;
  const netconf = ipamNetconf(etcd, { node: NODE, name: 'known' });
  /** netplug-ipam's ADD or DEL as the agent serves it; the parsed stdout of an ADD. */
  const run = async (command: 'ADD' | 'DEL', id: string) => {
    const env = { CNI_COMMAND: command, CNI_CONTAINERID: id, CNI_NETNS: netns, CNI_IFNAME: 'eth0', CNI_PATH: '/usr/lib/cni' };
    const outcome = await runMain(
      { env, readStdin: () => Buffer.from(JSON.stringify(netconf)), stderr: () => undefined, pid: process.pid },
      'netplug-ipam',
      services,
    );
    return { exitCode: outcome.exitCode, result: outcome.stdout ? JSON.parse(outcome.stdout) : undefined };
  };
  const address = (outcome: { result?: { ips?: { address: string }[] } }) => outcome.result?.ips?.[0]?.address.split('/')[0] ?? '';
  /** netplug-ipam's ADD as the plugin's ADD calls it, on what the agent knows; the addresses it planned and got. */
  const addPlanned = async (id: string) => {
    const env = parseEnvironment('ADD', {
      CNI_COMMAND: 'ADD',
      CNI_CONTAINERID: id,
      CNI_NETNS: netns,
      CNI_IFNAME: 'eth0',
      CNI_PATH: '/usr/lib/cni',
    });
    const parsed = parseNetconf(Buffer.from(JSON.stringify(netconf)));
    const assumed = assumedAhead(known.fresh(NODE), [4], 0);
    const ipam = new NetplugIpam({
      env,
      netconf: parsed,
      log: new Logger('netplug-ipam', () => undefined, process.pid),
      store: () => Promise.resolve(store),
      node: NODE,
      turns: services.ipamTurns,
      known,
      ...(assumed ? { prefetched: { reads: addReads(handleId('known', id), NODE, [4], []), results: Promise.resolve(assumed) } } : {}),
    });
    const planned: string[][] = [];
    const result = await ipam.add([], {}, { planned: (addresses) => planned.push([...addresses]) });
    return { assumed: assumed !== undefined, planned, got: (result.ips ?? []).map((ip) => ip.address.split('/')[0]) };
  };
  return { etcd, store: opened, counts, run, address, addPlanned };
}

test('an ADD on what the agent knows commits without reading; what another writer changed fails that commit, whose answer it commits again on', async (t) => {
  const { etcd, counts, run, address } = await agentLike(t);
  ctlOk(t, etcd, 'pool', 'create', 'known-a', '--cidr', '10.71.0.0/16');
  const first = await run('ADD', containerId());
  t.is(first.exitCode, 0);
  const readsBefore = counts.reads;
  const second = await run('ADD', containerId());
  t.is(second.exitCode, 0);
  t.is(counts.reads, readsBefore, 'the second ADD read nothing');

  // Another writer (a one-shot on the node) takes the next address of the same block.
  const other = ipamNetconf(etcd, { node: NODE, name: 'known' });
  const oneShot = invoke({
    command: 'ADD',
    containerId: containerId(),
    netns: createNetns(t, 'known-other').path,
    netconf: other,
    executable: NETPLUG_IPAM,
  });
  t.is(oneShot.status, 0, oneShot.stdout);
  const taken = String(JSON.parse(oneShot.stdout).ips[0].address).split('/')[0];
  const commitsBefore = counts.commits;
  const third = await run('ADD', containerId());
  t.is(third.exitCode, 0);
  t.is(counts.commits - commitsBefore, 2, 'the stale block failed the first commit; the second held');
  t.is(counts.reads, readsBefore, 'the failed commit returned the block as it is: nothing else was read');
  const addresses = [address(first), address(second), address(third), taken];
  t.is(new Set(addresses).size, 4, `no address twice: ${addresses.join(', ')}`);
  t.is(totalAllocated(t, etcd), 4);

  // A runtime repeating an ADD: the agent takes the handle to be new, the commit says otherwise,
  // and the ADD, read afresh, returns the address the container holds, taking none more.
  const repeatedId = containerId();
  const once = await run('ADD', repeatedId);
  const again = await run('ADD', repeatedId);
  t.is(address(again), address(once));
  t.is(totalAllocated(t, etcd), 5);
  t.is((await run('ADD', containerId())).exitCode, 0, 'and the next ADD commits on what the agent knows');
  t.is(totalAllocated(t, etcd), 6);
});

test('a pool disabled, or the datastore locked, after the agent learnt them: its next ADD reads afresh and obeys', async (t) => {
  const { etcd, store, run, address } = await agentLike(t);
  ctlOk(t, etcd, 'pool', 'create', 'known-old', '--cidr', '10.72.0.0/16');
  ctlOk(t, etcd, 'pool', 'create', 'known-new', '--cidr', '10.73.0.0/16');
  ctlOk(t, etcd, 'pool', 'update', 'known-new', '--disable');
  t.regex(address(await run('ADD', containerId())), /^10\.72\./);
  // Behind the agent's back: the old pool disabled, the new one enabled.
  ctlOk(t, etcd, 'pool', 'update', 'known-old', '--disable');
  ctlOk(t, etcd, 'pool', 'update', 'known-new', '--enable');
  t.regex(address(await run('ADD', containerId())), /^10\.73\./, 'the disabled pool was not used');

  t.regex(await lockDatastore(store), /locked/);
  const locked = await run('ADD', containerId());
  t.is(locked.exitCode, 1);
  t.regex(JSON.stringify(locked.result), /locked for a migration/);
  t.is(totalAllocated(t, etcd), 2, 'nothing allocated while locked');
  t.regex(await unlockDatastore(store), /unlocked/);
  t.is((await run('ADD', containerId())).exitCode, 0);
});

test('a DEL of an address the agent allocated releases it without reading, and after another writer changed the block, all the same', async (t) => {
  const { etcd, counts, run, address } = await agentLike(t);
  ctlOk(t, etcd, 'pool', 'create', 'known-del', '--cidr', '10.74.0.0/16');
  const [a, b, c] = [containerId(), containerId(), containerId()];
  const added = [];
  for (const id of [a, b, c]) added.push(await run('ADD', id));
  t.true(added.every((outcome) => outcome.exitCode === 0));
  const readsBefore = counts.reads;
  t.is((await run('DEL', a)).exitCode, 0);
  t.is(counts.reads, readsBefore, 'the DEL read nothing');
  t.is(totalAllocated(t, etcd), 2);

  // Another writer releases b's address: the block the agent knows is stale for c's DEL.
  ctlOk(t, etcd, 'ipam', 'release', '--ip', address(added[1] ?? {}));
  t.is((await run('DEL', c)).exitCode, 0);
  t.is(totalAllocated(t, etcd), 0, "c's address released after reading afresh");
  t.is((await run('DEL', b)).exitCode, 0, 'a DEL of what is gone is success');
});

test('an ADD whose known block went stale keeps the address it planned if it is still free (the interface set up with it stays)', async (t) => {
  const { etcd, run, addPlanned } = await agentLike(t);
  ctlOk(t, etcd, 'pool', 'create', 'known-keep', '--cidr', '10.75.0.0/16');
  t.is((await run('ADD', containerId())).exitCode, 0);
  // A one-shot's ADD and DEL in between: the block's revision moved on, its next address did not change hands.
  const other = ipamNetconf(etcd, { node: NODE, name: 'known' });
  const passing = { containerId: containerId(), netns: createNetns(t, 'known-pass').path, netconf: other, executable: NETPLUG_IPAM };
  t.is(invoke({ command: 'ADD', ...passing }).status, 0);
  t.is(invoke({ command: 'DEL', ...passing }).status, 0);

  const { assumed, planned, got } = await addPlanned(containerId());
  t.true(assumed, 'decided on what the agent knew');
  t.true(planned.length >= 2, `the stale commit failed and was planned again: ${JSON.stringify(planned)}`);
  t.deepEqual(got, planned[0], 'the address first planned, still free, is the one committed');
  t.is(totalAllocated(t, etcd), 2);
});

test("a pod's DEL, of a pod the agent added: the release and the endpoint's removal in one commit; an endpoint changed since is removed on its own", async (t) => {
  const { etcd, store } = await agentLike(t);
  ctlOk(t, etcd, 'pool', 'create', 'known-pod', '--cidr', '10.76.0.0/16');
  const { store: agentStore, counts } = counted(store);
  const services: PluginServices = {
    via: 'netplug-node',
    store: () => Promise.resolve(agentStore),
    ipamTurns: nodeTurns(),
    knownNodes: () => known,
  };
  const known = new KnownNodes();
  const netconf = { ...ipamNetconf(etcd, { node: NODE, name: 'known' }), type: 'netplug' };
  /** The plugin's command for a container in a namespace of its own, as the agent serves it. */
  const pod = () => {
    const id = containerId();
    const netns = createNetns(t, 'known-pod').path;
    return async (command: 'ADD' | 'DEL') => {
      const env = { CNI_COMMAND: command, CNI_CONTAINERID: id, CNI_NETNS: netns, CNI_IFNAME: 'eth0', CNI_PATH: '/usr/lib/cni' };
      const io = { env, readStdin: () => Buffer.from(JSON.stringify(netconf)), stderr: () => undefined, pid: process.pid };
      return (await runMain(io, 'netplug', services)).exitCode;
    };
  };
  const endpoints = async () => (await store.list(keys.workloadEndpoints)).length;

  const a = pod();
  t.is(await a('ADD'), 0);
  t.is(await endpoints(), 1);
  const before = { ...counts };
  t.is(await a('DEL'), 0);
  t.deepEqual({ reads: counts.reads - before.reads, commits: counts.commits - before.commits }, { reads: 0, commits: 1 });
  t.is(await endpoints(), 0, 'the endpoint went with the addresses');
  t.is(totalAllocated(t, etcd), 0);

  // Another writer rewrites the endpoint after the agent wrote it: the one commit fails on it, the
  // addresses are released all the same, and the endpoint, read afresh, removed on its own.
  const b = pod();
  t.is(await b('ADD'), 0);
  const [endpoint] = await store.list(keys.workloadEndpoints);
  t.true(await store.commit([{ key: endpoint?.key ?? '', update: endpoint?.value, revision: endpoint?.revision ?? '' }]));
  t.is(await b('DEL'), 0);
  t.is(await endpoints(), 0);
  t.is(totalAllocated(t, etcd), 0);
});
