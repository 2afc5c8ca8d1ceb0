// netplug-node routes pods between nodes: four "nodes" (network namespaces; n1–n3 on one subnet,
// n4 on another behind a router), each running the built netplug-node inside its namespace
// against one etcd and one kube-apiserver (both real), pods made inside each node by the built
// CNI plugin with netplug-ipam. The pool's modes are changed from test to test, and every pass of
// the agents recomputes everything: direct routes, IP-in-IP (Always, CrossSubnet), VXLAN (Always,
// CrossSubnet); pods on every node ping pods on every other node. natOutgoing: a pod reaching an
// address outside the pools is seen there with its node's address. A block released loses its
// route, a node removed from the datastore loses its routes everywhere; a stale netplug route is
// removed and a deleted one put back; routes stay while an agent restarts. The agents' refresh is
// an hour: every change they make comes from etcd's watch; only the kernel's repair waits for a
// refresh (made short for it).
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

import test from 'ava';

import { keys } from '../../ts/model/keys.ts';
import type { EncapsulationMode, PoolResource } from '../../ts/model/ip-pool.ts';
import { poolResource } from '../../ts/model/pool-resource.ts';
import { openStore } from '../../ts/store/open.ts';
import { retryOnConflict, type Store } from '../../ts/store/store.ts';
import { requireBuilt } from '../helpers/cni.ts';
import { type EtcdServer, startEtcd } from '../helpers/etcd.ts';
import { nftBinary, requireRoot } from '../helpers/kernel.ts';
import { startKube } from '../helpers/kube.ts';
import { makeTopology, netplugRoutes, type Pod, type TestNode, type Topology } from '../helpers/nodes.ts';
import { eventually } from '../helpers/eventually.ts';
import { sharedTeardowns } from '../helpers/shared.ts';

const POOL = 'routes-pool';
const POOL_CIDR = '10.244.0.0/16';
const SECOND_POOL = 'routes-second';
const SECOND_POOL_CIDR = '10.245.0.0/16';
/** The MTU of the nodes' links (makeTopology's veths). */
const UNDERLAY_MTU = 1500;
const shared = sharedTeardowns(test);
let topology: Topology;
let store: Store;
let etcd: EtcdServer;
let pods: Pod[] = [];

test.before(async () => {
  requireRoot();
  requireBuilt();
  etcd = await startEtcd(shared);
  const kube = await startKube(shared);
  store = await openStore({ datastore_type: 'etcdv3', etcd_endpoints: etcd.endpoints });
  shared.teardown(() => store.close());
  await setPool({ ipipMode: 'Never', vxlanMode: 'Never', natOutgoing: false });
  const kubePort = Number(new URL(kube.server.url).port);
  topology = await makeTopology(shared, {
    nodes: [
      { name: 'n1', subnet: 1 },
      { name: 'n2', subnet: 1 },
      { name: 'n3', subnet: 1 },
      { name: 'n4', subnet: 2 },
    ],
    ports: [etcd.port, kubePort],
    datastoreNetconf: etcd.netconf,
    agentEnv: {
      DATASTORE_TYPE: 'etcdv3',
      ETCD_ENDPOINTS: etcd.endpoints,
      KUBECONFIG: kube.server.admin.kubeconfig,
      NO_DEFAULT_POOLS: 'true',
      NETPLUG_ROUTE_REFRESH_INTERVAL: '3600',
    },
  });
  for (const node of topology.nodes) node.startAgent();
  pods = topology.nodes.map((node) => topology.addPod(node));
});

async function setPool(modes: { ipipMode: EncapsulationMode; vxlanMode: EncapsulationMode; natOutgoing: boolean }): Promise<void> {
  await retryOnConflict('setting the pool', async () => {
    const entry = await store.get<PoolResource>(keys.pool(POOL));
    const value = entry?.value ?? poolResource(POOL, { cidr: POOL_CIDR, 'block-size': '26' }, new Date());
    const updated = { ...value, spec: { ...value.spec, ...modes } };
    return (
      (await store.commit([
        entry ? { key: entry.key, update: updated, revision: entry.revision } : { key: keys.pool(POOL), create: updated },
      ])) || undefined
    );
  });
}

const blockOf = (pod: Pod) => {
  const [a, b, c, d] = pod.address.split('.').map(Number) as [number, number, number, number];
  return `${a}.${b}.${c}.${d - (d % 64)}/26`;
};

/** Every pod pings every pod on another node (each pair both ways), until all answer. */
async function everyPodReachesEveryOther(t: { log(...v: unknown[]): void }, among: readonly Pod[]): Promise<number> {
  let pairs = 0;
  for (const from of among)
    for (const to of among) {
      if (from.node === to.node) continue;
      await eventually(
        `a pod on ${from.node.name} pings ${to.address} on ${to.node.name}`,
        () => topology.exec(from.netns, ['ping', '-c', '1', '-W', '1', to.address]).status === 0,
      ).catch((err: Error) => {
        for (const end of [from.node, to.node]) t.log(end.name, netplugRoutes(end.netns), end.log().slice(-3000));
        throw err;
      });
      pairs++;
    }
  return pairs;
}

let ipip: boolean | undefined;
/** Whether this kernel makes IP-in-IP devices (tried in the test's underlay namespace). */
function ipipSupported(): boolean {
  if (ipip === undefined) {
    ipip = topology.exec(topology.underlay, ['ip', 'link', 'add', 'npipiptry', 'type', 'ipip']).status === 0;
    topology.exec(topology.underlay, ['ip', 'link', 'del', 'npipiptry']);
  }
  return ipip;
}

/** The agent's /readyz answer on its node (its health server on the node's loopback). */
const readiness = (on: TestNode) => topology.exec(on.netns, ['curl', '-s', '-m', '5', 'http://127.0.0.1:9099/readyz']).stdout;

const node = (name: string) => topology.nodes.find((n) => n.name === name) as TestNode;
const podOn = (name: string) => pods.find((p) => p.node.name === name) as Pod;

async function routesBecome(on: TestNode, wanted: string[]): Promise<void> {
  await eventually(
    `${on.name}'s netplug routes are ${JSON.stringify(wanted)}`,
    () => JSON.stringify(netplugRoutes(on.netns)) === JSON.stringify([...wanted].sort()),
    { timeoutMs: 90_000 },
  ).catch((err: Error) => {
    throw new Error(`${err.message}; they are ${JSON.stringify(netplugRoutes(on.netns))}; log: ${on.log().slice(-2000)}`);
  });
}

test.serial(
  'encapsulation Never: same-subnet nodes route directly via each other; the node on the other subnet is left to the underlay',
  async (t) => {
    await setPool({ ipipMode: 'Never', vxlanMode: 'Never', natOutgoing: false });
    await routesBecome(node('n1'), [`${blockOf(podOn('n2'))} via 172.30.1.2 dev eth0`, `${blockOf(podOn('n3'))} via 172.30.1.3 dev eth0`]);
    const pairs = await everyPodReachesEveryOther(
      t,
      pods.filter((p) => p.node.subnet === 1),
    );
    t.is(pairs, 6);
    t.deepEqual(netplugRoutes(node('n4').netns), []);
  },
);

// This machine's kernel may lack the ipip driver (CONFIG_NET_IPIP): then the agent must say so on
// /readyz and in its log, and still program every route that needs no IP-in-IP.
const IPIP_MISSING = /this kernel has no ipip \(CONFIG_NET_IPIP\) driver/;

test.serial('IPIP Always: every node reaches every other through tunl0, via the node, onlink', async (t) => {
  await setPool({ ipipMode: 'Always', vxlanMode: 'Never', natOutgoing: false });
  if (!ipipSupported()) {
    t.log('this kernel has no ipip driver: checking that the agent reports it (pings over IP-in-IP need a kernel with it, as CI has)');
    await eventually('n1 reports the missing driver on /readyz', () => IPIP_MISSING.test(readiness(node('n1'))), { timeoutMs: 90_000 });
    // The log arrives through a pipe the test reads between its polls, so it too is awaited.
    await eventually('n1 logs the missing driver', () => IPIP_MISSING.test(node('n1').log()), { timeoutMs: 30_000 });
    t.regex(node('n1').log(), IPIP_MISSING);
    await routesBecome(node('n1'), []);
    return;
  }
  await routesBecome(
    node('n1'),
    ['n2', 'n3', 'n4'].map((name) => `${blockOf(podOn(name))} via ${node(name).address} dev tunl0 onlink`),
  );
  t.is(await everyPodReachesEveryOther(t, pods), 12);
  t.is(readiness(node('n1')), 'ok\n');
});

test.serial('IPIP CrossSubnet: same-subnet pairs go direct, the others through tunl0', async (t) => {
  await setPool({ ipipMode: 'CrossSubnet', vxlanMode: 'Never', natOutgoing: false });
  const direct = [`${blockOf(podOn('n2'))} via 172.30.1.2 dev eth0`, `${blockOf(podOn('n3'))} via 172.30.1.3 dev eth0`];
  if (!ipipSupported()) {
    t.log('this kernel has no ipip driver: same-subnet pairs must still go direct, and the agent say why the others do not');
    await routesBecome(node('n1'), direct);
    await eventually('n1 reports the missing driver on /readyz', () => IPIP_MISSING.test(readiness(node('n1'))), { timeoutMs: 90_000 });
    t.is(
      await everyPodReachesEveryOther(
        t,
        pods.filter((p) => p.node.subnet === 1),
      ),
      6,
    );
    return;
  }
  await routesBecome(node('n1'), [...direct, `${blockOf(podOn('n4'))} via ${node('n4').address} dev tunl0 onlink`]);
  await routesBecome(
    node('n4'),
    ['n1', 'n2', 'n3'].map((name) => `${blockOf(podOn(name))} via ${node(name).address} dev tunl0 onlink`),
  );
  t.is(await everyPodReachesEveryOther(t, pods), 12);
});

test.serial('VXLAN Always: every node reaches every other over vxlan.netplug; IPIP is gone', async (t) => {
  await setPool({ ipipMode: 'Never', vxlanMode: 'Always', natOutgoing: false });
  await eventually(
    'n1 routes all three other blocks over VXLAN',
    () => netplugRoutes(node('n1').netns).filter((r) => r.includes('dev vxlan.netplug onlink')).length === 3,
    { timeoutMs: 90_000 },
  ).catch((err: Error) => {
    throw new Error(`${err.message}; routes ${JSON.stringify(netplugRoutes(node('n1').netns))}; log: ${node('n1').log().slice(-3000)}`);
  });
  t.is(await everyPodReachesEveryOther(t, pods), 12);
  const fdb = topology.exec(node('n1').netns, ['bridge', 'fdb', 'show', 'dev', 'vxlan.netplug']).stdout;
  for (const name of ['n2', 'n3', 'n4']) t.regex(fdb, new RegExp(`dst ${node(name).address.replaceAll('.', '\\.')} .*permanent`));
  t.false(topology.exec(node('n1').netns, ['ip', '-4', 'addr', 'show', 'dev', 'tunl0']).stdout.includes('inet '));
  await eventually('n1 is ready', () => readiness(node('n1')) === 'ok\n');
  const metrics = topology.exec(node('n1').netns, ['curl', '-s', '-m', '5', 'http://127.0.0.1:9099/metrics']).stdout;
  t.regex(metrics, /netplug_routes\{kind="vxlan"\} 3/);
});

test.serial('VXLAN CrossSubnet: same-subnet pairs go direct, the others over VXLAN', async (t) => {
  await setPool({ ipipMode: 'Never', vxlanMode: 'CrossSubnet', natOutgoing: false });
  await eventually(
    'n1 routes n2 and n3 directly, n4 over VXLAN',
    () => {
      const routes = netplugRoutes(node('n1').netns);
      return (
        routes.filter((r) => r.includes('dev eth0')).length === 2 && routes.filter((r) => r.includes('dev vxlan.netplug')).length === 1
      );
    },
    { timeoutMs: 90_000 },
  );
  t.is(await everyPodReachesEveryOther(t, pods), 12);
  // Pods made now leave room for VXLAN's 50 bytes (the agent's MTU file follows the pool), so a
  // full-size packet that must not be fragmented crosses to the other subnet.
  await eventually('the MTU files leave room for VXLAN', () =>
    ['n1', 'n4'].every((name) => readFileSync(join(node(name).varDir, 'mtu'), 'utf8') === String(UNDERLAY_MTU - 50)),
  );
  const [from, to] = [topology.addPod(node('n1')), topology.addPod(node('n4'))];
  t.teardown(() => {
    topology.deletePod(from);
    topology.deletePod(to);
  });
  t.regex(topology.exec(from.netns, ['ip', 'link', 'show', 'dev', 'eth0']).stdout, new RegExp(`mtu ${UNDERLAY_MTU - 50} `));
  const fullSize = String(UNDERLAY_MTU - 50 - 28); // less the IPv4 and ICMP headers
  const ping = topology.exec(from.netns, ['ping', '-c', '1', '-W', '2', '-M', 'do', '-s', fullSize, to.address]);
  t.is(ping.status, 0, ping.stdout + ping.stderr);
});

test.serial("natOutgoing: a pod reaching an address outside the pools is seen there with its node's address", async (t) => {
  await setPool({ ipipMode: 'Never', vxlanMode: 'CrossSubnet', natOutgoing: true });
  const seen = (pod: Pod) =>
    new Promise<string>((resolve, reject) => {
      // A listener on the router (no route to any pod: only a masqueraded connection completes).
      const server = spawn('ip', [
        'netns',
        'exec',
        topology.router.name,
        process.execPath,
        '-e',
        "const s=require('node:net').createServer((c)=>{console.log(c.remoteAddress);c.end();s.close()}).listen(8089,'0.0.0.0',()=>console.log('listening'))",
      ]);
      let out = '';
      server.stdout.setEncoding('utf8').on('data', async (text: string) => {
        out += text;
        if (text.includes('listening')) {
          await eventually(
            `${pod.node.name}'s pod connects to ${topology.outside}`,
            () => topology.exec(pod.netns, ['bash', '--norc', '-c', `exec 3<>/dev/tcp/${topology.outside}/8089`], 5_000).status === 0,
          ).catch(reject);
        }
      });
      server.on('exit', () => resolve(out.replace('listening', '').trim()));
      setTimeout(() => server.kill('SIGKILL'), 90_000).unref();
    });
  for (const name of ['n1', 'n4']) t.is(await seen(podOn(name)), node(name).address);
  const rules = topology.exec(node('n1').netns, [nftBinary(), 'list', 'chain', 'inet', 'netplug', 'nat-outgoing']).stdout;
  t.true(rules.includes(`ip saddr ${POOL_CIDR} masquerade`), rules);
  // Pod to pod keeps its source: still every pair answers.
  t.is(await everyPodReachesEveryOther(t, pods), 12);
  await setPool({ ipipMode: 'Never', vxlanMode: 'CrossSubnet', natOutgoing: false });
  await eventually(
    'the chain is removed when no pool asks',
    () => topology.exec(node('n1').netns, [nftBinary(), 'list', 'chain', 'inet', 'netplug', 'nat-outgoing']).status !== 0,
  );
});

/** How many reconciles a controller of the agent on `on` has run (its /metrics), whatever their result. */
function reconciles(on: TestNode, controller: string): number {
  const text = topology.exec(on.netns, ['curl', '-s', '-m', '5', 'http://127.0.0.1:9099/metrics']).stdout;
  const pattern = new RegExp(`^netplug_controller_reconcile_total\\{controller="${controller}",result="\\w+"\\} (\\d+)$`, 'gm');
  return [...text.matchAll(pattern)].reduce((sum, match) => sum + Number(match[1]), 0);
}

test.serial(
  "a node's routes are programmed again only when they change: not for a pod on another node, nor for its own addresses being published again",
  async (t) => {
    await setPool({ ipipMode: 'Never', vxlanMode: 'CrossSubnet', natOutgoing: false });
    const n1 = node('n1');
    await eventually('n1 routes n4 over VXLAN', () => netplugRoutes(n1.netns).some((r) => r.includes('dev vxlan.netplug')), {
      timeoutMs: 90_000,
    });
    // Settled: what n1 published is what it holds.
    await eventually('n1 has published its VXLAN tunnel address', async () => {
      const spec = (await store.get<{ spec: Record<string, unknown> }>(keys.node('n1')))?.value.spec;
      return spec?.['ipv4VXLANTunnelAddr'] !== undefined;
    });
    const [routes, addresses] = [reconciles(n1, 'routes'), reconciles(n1, 'addresses')];

    // Its addresses removed by hand: the addresses subsystem publishes them again, once; n1's
    // routes do not depend on what it publishes.
    const entry = await store.get<{ spec: Record<string, unknown> }>(keys.node('n1'));
    if (!entry) throw new Error('n1 is not registered');
    t.true(await store.commit([{ key: entry.key, update: { ...entry.value, spec: {} }, revision: entry.revision }]));
    await eventually('n1 published its addresses again', async () => {
      const spec = (await store.get<{ spec: Record<string, unknown> }>(keys.node('n1')))?.value.spec;
      return spec?.['ipv4VXLANTunnelAddr'] !== undefined && spec['bgp'] !== undefined;
    });
    // A pod on n2 takes an address in n2's block: nothing changes for n1's routes.
    const same = topology.addPod(node('n2'));
    t.is(blockOf(same), blockOf(podOn('n2')));
    // A pool of its own for a pod on n2: a new block, a new route on n1 (the one pass expected).
    const third = { name: 'routes-third', cidr: '10.247.0.0/16' };
    await createPool(third.name, third.cidr);
    const extra = topology.addPod(node('n2'), [third.name]);
    await eventually('n1 routes the new block', () => netplugRoutes(n1.netns).some((r) => r.startsWith(`${blockOf(extra)} `)), {
      timeoutMs: 90_000,
    });
    t.is(reconciles(n1, 'routes'), routes + 1, "one pass on n1: the new block's route");
    t.is(reconciles(n1, 'addresses'), addresses + 1, 'one reconcile of its addresses: publishing them again');

    for (const pod of [same, extra]) topology.deletePod(pod);
    await releaseBlock(blockOf(extra), 'n2');
    await eventually(
      'n1 no longer routes the released block',
      () => !netplugRoutes(n1.netns).some((r) => r.startsWith(`${blockOf(extra)} `)),
    );
    const pool = await store.get(keys.pool(third.name));
    if (pool) await store.commit([{ key: pool.key, remove: true, revision: pool.revision }]);
  },
);

test.serial('a block claimed gets a route on the other nodes, and loses it when released', async (t) => {
  await setPool({ ipipMode: 'Never', vxlanMode: 'Always', natOutgoing: false });
  // A pod on n2 from a second pool: n2 claims a block there.
  await createPool(SECOND_POOL, SECOND_POOL_CIDR);
  const extra = topology.addPod(node('n2'), [SECOND_POOL]);
  const block = blockOf(extra);
  t.true(block.startsWith('10.245.'));
  await eventually(
    'n1 and n4 route the claimed block',
    () =>
      ['n1', 'n4'].every((name) =>
        netplugRoutes(node(name).netns).some((r) => r.startsWith(`${block} `) && r.endsWith('dev vxlan.netplug onlink')),
      ),
    { timeoutMs: 90_000 },
  );
  t.is(await everyPodReachesEveryOther(t, [extra, podOn('n1'), podOn('n4')]), 6);
  topology.deletePod(extra);
  await releaseBlock(block, 'n2');
  await eventually(
    'n1 and n4 no longer route the released block',
    () => ['n1', 'n4'].every((name) => !netplugRoutes(node(name).netns).some((r) => r.startsWith(`${block} `))),
    { timeoutMs: 90_000 },
  );
  t.true(
    netplugRoutes(node('n1').netns).some((r) => r.startsWith(`${blockOf(podOn('n2'))} `)),
    "n2's other block keeps its route",
  );
});

test.serial(
  "the kernel follows the datastore, not the agent's memory: a stale netplug route is removed, a deleted one put back, and routes stay while the agent restarts",
  async (t) => {
    await setPool({ ipipMode: 'Never', vxlanMode: 'CrossSubnet', natOutgoing: false });
    const n1 = node('n1');
    // A hand-made change is no datastore change: a refresh puts it right.
    await n1.stopAgent();
    n1.startAgent({ NETPLUG_ROUTE_REFRESH_INTERVAL: '2' });
    const n2Block = `${blockOf(podOn('n2'))} via ${node('n2').address} dev eth0`;
    await eventually('n1 routes n2 directly', () => netplugRoutes(n1.netns).includes(n2Block), { timeoutMs: 90_000 });
    topology.exec(n1.netns, ['ip', 'route', 'add', '10.244.250.0/26', 'via', node('n3').address, 'proto', '80']);
    topology.exec(n1.netns, ['ip', 'route', 'del', blockOf(podOn('n2'))]);
    await eventually('the stale route is gone and the deleted one back', () => {
      const routes = netplugRoutes(n1.netns);
      return routes.includes(n2Block) && !routes.some((r) => r.startsWith('10.244.250.0/26'));
    });
    // An agent that stops leaves its routes: pods keep talking while it restarts.
    await node('n2').stopAgent();
    t.is(await everyPodReachesEveryOther(t, [podOn('n1'), podOn('n2'), podOn('n4')]), 6);
    node('n2').startAgent();
    await eventually('n2 is ready again', () => readiness(node('n2')) === 'ok\n', { timeoutMs: 90_000 });
    t.is(await everyPodReachesEveryOther(t, [podOn('n1'), podOn('n2'), podOn('n4')]), 6);
  },
);

test.serial('a node removed from the datastore loses its routes on every other node', async (t) => {
  const gone = node('n3');
  await eventually('n1 routes n3', () => netplugRoutes(node('n1').netns).some((r) => r.startsWith(`${blockOf(podOn('n3'))} `)), {
    timeoutMs: 90_000,
  });
  await gone.stopAgent();
  const entry = await store.get(keys.node('n3'));
  t.truthy(entry);
  if (entry) t.true(await store.commit([{ key: entry.key, remove: true, revision: entry.revision }]));
  for (const name of ['n1', 'n2', 'n4'])
    await eventually(
      `${name} has no route to n3's block`,
      () => !netplugRoutes(node(name).netns).some((r) => r.startsWith(`${blockOf(podOn('n3'))} `)),
      { timeoutMs: 90_000 },
    );
  t.is(
    await everyPodReachesEveryOther(
      t,
      pods.filter((p) => p.node !== gone),
    ),
    6,
  );
});

async function createPool(name: string, cidr: string): Promise<void> {
  const pool = poolResource(name, { cidr, 'block-size': '26', 'vxlan-mode': 'Always' }, new Date());
  await store.commit([{ key: keys.pool(name), create: pool }]);
}

/** What releasing an empty block does (netplugctl, the controllers): the block loses its affinity, the affinity goes. */
async function releaseBlock(cidr: string, owner: string): Promise<void> {
  await retryOnConflict('releasing the block', async () => {
    const block = await store.get<Record<string, unknown>>(keys.block(cidr));
    const affinity = await store.get(keys.affinity(owner, cidr));
    if (!block) throw new Error(`no block ${cidr}`);
    const writes = [
      { key: block.key, remove: true as const, revision: block.revision },
      ...(affinity ? [{ key: affinity.key, remove: true as const, revision: affinity.revision }] : []),
    ];
    return (await store.commit(writes)) || undefined;
  });
}
