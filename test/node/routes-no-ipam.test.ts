// ipAddrsNoIpam addresses between nodes, on both datastores (workload-cluster.ts: two nodes on one
// subnet running the built netplug-node, Kubernetes pods made by the built plugin): an address in
// a pool without VXLAN gets a host route to its pod's node on the other node, and a pod there
// reaches it; the route goes with the pod. In a VXLAN pool or in no pool there is no route, and
// the agent says why. On etcd the agents read the pods' workload endpoints; on the Kubernetes
// datastore the pods themselves.
import test, { type ExecutionContext } from 'ava';

import { ANNOTATIONS } from '../../ts/model/pod-annotations.ts';
import { requireBuilt } from '../helpers/cni.ts';
import { startEtcd } from '../helpers/etcd.ts';
import { eventually } from '../helpers/eventually.ts';
import { requireRoot } from '../helpers/kernel.ts';
import { installCrds, removeIpamLockFileAfter, startKube } from '../helpers/kube.ts';
import { netplugRoutes, type Pod } from '../helpers/nodes.ts';
import { sharedTeardowns } from '../helpers/shared.ts';
import { type Datastore, startWorkloadCluster, type WorkloadCluster } from './workload-cluster.ts';

const shared = sharedTeardowns(test);
const clusters = new Map<Datastore, WorkloadCluster>();
const PLAIN = { name: 'plain', cidr: '10.247.0.0/16' };
const VXLAN = { name: 'vx', cidr: '10.248.0.0/16', vxlanMode: 'Always' as const };
/** Ordinary pods take their address from the pool without encapsulation. */
const inPlain = { [ANNOTATIONS.ipv4pools]: JSON.stringify([PLAIN.name]) };
const noIpam = (address: string) => ({ [ANNOTATIONS.ipAddrsNoIpam]: JSON.stringify([address]) });

test.before(async () => {
  requireRoot();
  requireBuilt();
  removeIpamLockFileAfter(shared);
  const [etcd, kube] = await Promise.all([startEtcd(shared), startKube(shared)]);
  await installCrds(kube);
  const pools = [PLAIN, VXLAN];
  clusters.set('etcdv3', await startWorkloadCluster(shared, { datastore: 'etcdv3', prefix: 'e', kube, etcd, pools }));
  clusters.set('kubernetes', await startWorkloadCluster(shared, { datastore: 'kubernetes', prefix: 'k', kube, pools }));
});

const pings = (cluster: WorkloadCluster, from: Pod, to: string) =>
  cluster.topology.exec(from.netns, ['ping', '-c', '1', '-W', '1', to]).status === 0;

const routedInPlainPool = test.macro({
  title: (_given, datastore: Datastore) =>
    `${datastore}: an ipAddrsNoIpam address in a pool without VXLAN is routed to its node, reached from a pod there, and unrouted once the pod goes`,
  exec: async (t: ExecutionContext, datastore: Datastore) => {
    const cluster = clusters.get(datastore) as WorkloadCluster;
    const [n1, n2] = cluster.nodes;
    const client = await cluster.addPod(n1, 'client', inPlain);
    const fixed = await cluster.addPod(n2, 'fixed', noIpam('10.247.200.5'));
    t.is(fixed.address, '10.247.200.5');
    // A host route, as `ip route` shows it: no /32.
    const route = `10.247.200.5 via ${n2.address} dev eth0`;
    await cluster.routesBecome(n1, `routes ${route}`, (routes) => routes.includes(route));
    await eventually('the client on the other node pings the ipAddrsNoIpam address', () => pings(cluster, client, fixed.address));
    // n2 holds the pod: it routes it through the pod's veth, not with a route of its own.
    t.false(netplugRoutes(n2.netns).some((r) => r.startsWith('10.247.200.5 ')));
    await cluster.deletePod(fixed);
    await cluster.routesBecome(n1, 'no route to the deleted pod', (routes) => !routes.some((r) => r.startsWith('10.247.200.5 ')));
    await cluster.deletePod(client);
  },
});

const notRouted = test.macro({
  title: (_given, datastore: Datastore) =>
    `${datastore}: an ipAddrsNoIpam address in a VXLAN pool or in no pool is not routed, and the agent says why`,
  exec: async (t: ExecutionContext, datastore: Datastore) => {
    const cluster = clusters.get(datastore) as WorkloadCluster;
    const [n1, n2] = cluster.nodes;
    const namespace = `wl-${datastore === 'etcdv3' ? 'e' : 'k'}`;
    const inVxlan = await cluster.addPod(n2, 'in-vxlan', noIpam('10.248.200.5'));
    const outside = await cluster.addPod(n2, 'outside', noIpam('192.168.77.5'));
    const notes = [
      `address 10.248.200.5 of ${namespace}/in-vxlan (node "${n2.name}") is in pool "vx", which uses VXLAN: not routed to their node`,
      `address 192.168.77.5 of ${namespace}/outside (node "${n2.name}") is in no pool: not routed to their node`,
    ];
    await eventually('the agent on the other node says why neither is routed', () => notes.every((note) => n1.log().includes(note))).catch(
      (err: Error) => {
        throw new Error(`${err.message}; log: ${n1.log().slice(-3000)}`);
      },
    );
    const routes = cluster.topology.exec(n1.netns, ['ip', '-4', 'route', 'show']).stdout;
    t.false(routes.includes('10.248.200.5'), routes);
    t.false(routes.includes('192.168.77.5'), routes);
    await cluster.deletePod(inVxlan);
    await cluster.deletePod(outside);
  },
});

for (const datastore of ['etcdv3', 'kubernetes'] as const) {
  test.serial(routedInPlainPool, datastore);
  test.serial(notRouted, datastore);
}
