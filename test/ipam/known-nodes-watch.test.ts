// What the agent knows, kept current by its watch of blocks and pools (ts/ipam/watched-ipam.ts):
// on etcd an ADD decides on it however old its own reads are, and reads nothing; a view the watch
// has not brought up to date yet (another writer's allocation not shown) fails the commit, which
// is decided again on what the failure returned: never an address twice. A watch out of step is
// not trusted: the ADD reads.
import test, { type ExecutionContext } from 'ava';

import { KnownNodes } from '../../ts/ipam/known-nodes.ts';
import { WatchedIpam } from '../../ts/ipam/watched-ipam.ts';
import { keys } from '../../ts/model/keys.ts';
import { nodeTurns } from '../../ts/node/cni/cni-services.ts';
import { runMain } from '../../ts/plugin/main.ts';
import type { PluginServices } from '../../ts/plugin/services.ts';
import { openStore } from '../../ts/store/open.ts';
import type { FollowEvents, Store } from '../../ts/store/store.ts';
import { invoke } from '../helpers/cni.ts';
import { startEtcd } from '../helpers/etcd.ts';
import { ctlOk, ipamNetconf, NETPLUG_IPAM, totalAllocated } from '../helpers/ipam.ts';
import { containerId, createNetns } from '../helpers/kernel.ts';

const NODE = 'node-watched';
/** Past the freshness of what an ADD read (FACTS_FRESH_MS). */
const LATER = 60_000;

/**
 * An agent's ADD as netplug-node runs it, with a clock of the test's, and a watch whose events the
 * test delivers itself (`deliver`), so that it can hold the view back.
 */
async function agent(t: ExecutionContext) {
  const etcd = await startEtcd(t);
  const opened = await openStore(etcd.netconf);
  t.teardown(() => opened.close());
  const counts = { reads: 0, commits: 0 };
  const store = new Proxy(opened, {
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
  }) as Store;
  const watched = new WatchedIpam();
  const events = new Map<string, FollowEvents>();
  const follow = watched.teed((prefix, told) => {
    events.set(prefix, told);
    return { stop: () => undefined };
  });
  const quiet: FollowEvents = { listed: () => undefined, changed: () => undefined, removed: () => undefined, failed: () => undefined };
  follow(keys.allBlocks, quiet);
  follow(keys.pools, quiet);
  /** The watch catches up: every block and pool as they are now. */
  const deliver = async () => {
    events.get(keys.allBlocks)?.listed(await opened.list(keys.allBlocks));
    events.get(keys.pools)?.listed(await opened.list(keys.pools));
  };
  const outOfStep = () => events.get(keys.allBlocks)?.failed(new Error('connection lost'));
  let clock = 0;
  const known = new KnownNodes(() => clock, watched);
  const services: PluginServices = {
    via: 'netplug-node',
    store: () => Promise.resolve(store),
    ipamTurns: nodeTurns(),
    knownNodes: () => known,
  };
  const netns = createNetns(t, 'watched').path;
  const netconf = ipamNetconf(etcd, { node: NODE, name: 'watched' });
  const add = async () => {
    const env = { CNI_COMMAND: 'ADD', CNI_CONTAINERID: containerId(), CNI_NETNS: netns, CNI_IFNAME: 'eth0', CNI_PATH: '/usr/lib/cni' };
    const outcome = await runMain(
      { env, readStdin: () => Buffer.from(JSON.stringify(netconf)), stderr: () => undefined, pid: process.pid },
      'netplug-ipam',
      services,
    );
    t.is(outcome.exitCode, 0, outcome.stdout);
    return String(JSON.parse(outcome.stdout).ips[0].address).split('/')[0] as string;
  };
  /** Another writer on the node (a one-shot), which the agent's view does not see until delivered. */
  const oneShotAdd = () => {
    const run = invoke({ command: 'ADD', containerId: containerId(), netns, netconf, executable: NETPLUG_IPAM });
    t.is(run.status, 0, run.stdout);
    return String(JSON.parse(run.stdout).ips[0].address).split('/')[0] as string;
  };
  const later = () => {
    clock += LATER;
  };
  return { etcd, counts, add, oneShotAdd, deliver, outOfStep, later };
}

test('with the watch in step, an ADD long after the agent last read decides on what it knows and reads nothing', async (t) => {
  const { etcd, counts, add, deliver, later } = await agent(t);
  ctlOk(t, etcd, 'pool', 'create', 'watched-a', '--cidr', '10.81.0.0/16');
  const first = await add();
  await deliver();
  later();
  const before = { ...counts };
  const second = await add();
  t.deepEqual({ reads: counts.reads - before.reads, commits: counts.commits - before.commits }, { reads: 0, commits: 1 });
  t.not(first, second);
  t.is(totalAllocated(t, etcd), 2);
});

test('a stale view (another writer allocated, the watch has not shown it): the commit fails on the block, is decided again, and no address is given twice', async (t) => {
  const { etcd, counts, add, oneShotAdd, deliver, later } = await agent(t);
  ctlOk(t, etcd, 'pool', 'create', 'watched-b', '--cidr', '10.82.0.0/16');
  const addresses = [await add()];
  await deliver();
  later();
  // Held back: the view still shows the block as the agent's last commit left it.
  addresses.push(oneShotAdd());
  const before = { ...counts };
  addresses.push(await add());
  t.deepEqual(
    { reads: counts.reads - before.reads, commits: counts.commits - before.commits },
    { reads: 0, commits: 2 },
    'the first commit lost on the block; its answer was the block as it is, and the second held',
  );
  // Shown by the watch: the next ADD commits at once.
  await deliver();
  addresses.push(oneShotAdd());
  await deliver();
  const settled = { ...counts };
  addresses.push(await add());
  t.is(counts.commits - settled.commits, 1);
  t.is(new Set(addresses).size, addresses.length, `no address twice: ${addresses.join(', ')}`);
  t.is(totalAllocated(t, etcd), addresses.length);
});

test('a watch out of step is not trusted: an ADD long after the last read reads again', async (t) => {
  const { etcd, counts, add, deliver, outOfStep, later } = await agent(t);
  ctlOk(t, etcd, 'pool', 'create', 'watched-c', '--cidr', '10.83.0.0/16');
  await add();
  await deliver();
  outOfStep();
  later();
  const before = counts.reads;
  await add();
  t.true(counts.reads > before, 'read afresh');
});
