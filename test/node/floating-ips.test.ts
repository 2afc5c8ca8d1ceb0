// Floating IPs between nodes, on both datastores (workload-cluster.ts: two nodes on one subnet
// running the built netplug-node, Kubernetes pods made by the built plugin). A pod on n2 with a
// floating IP from a pool without VXLAN: n1 routes the floating IP to n2, n2 forwards it to the
// pod (a dnat rule in netplug's table), and a pod on n1, n2 itself and the pod itself reach the
// pod through it.
// Once the pod goes, so do the route and the rule, and the floating IP reaches nothing. On etcd
// the agents read the workload endpoint's ipNATs; on the Kubernetes datastore the pod's annotation.
import test from 'ava';

import { ANNOTATIONS } from '../../ts/model/pod-annotations.ts';
import { requireBuilt } from '../helpers/cni.ts';
import { startEtcd } from '../helpers/etcd.ts';
import { eventually } from '../helpers/eventually.ts';
import { nftBinary, requireRoot } from '../helpers/kernel.ts';
import { installCrds, removeIpamLockFileAfter, startKube } from '../helpers/kube.ts';
import type { Netns } from '../helpers/nodes.ts';
import { sharedTeardowns } from '../helpers/shared.ts';
import { type Datastore, startWorkloadCluster, type WorkloadCluster } from './workload-cluster.ts';

const shared = sharedTeardowns(test);
const clusters = new Map<Datastore, WorkloadCluster>();
const PLAIN = { name: 'plain', cidr: '10.247.0.0/16' };
/** Where floating IPs come from: a pool, so that other nodes route them. */
const FLOATING = { name: 'floating', cidr: '10.249.0.0/24' };
const FLOATING_IP = '10.249.0.10';
const inPlain = { [ANNOTATIONS.ipv4pools]: JSON.stringify([PLAIN.name]) };

test.before(async () => {
  requireRoot();
  requireBuilt();
  removeIpamLockFileAfter(shared);
  const [etcd, kube] = await Promise.all([startEtcd(shared), startKube(shared)]);
  await installCrds(kube);
  const pools = [PLAIN, FLOATING];
  clusters.set('etcdv3', await startWorkloadCluster(shared, { datastore: 'etcdv3', prefix: 'fe', kube, etcd, pools }));
  clusters.set('kubernetes', await startWorkloadCluster(shared, { datastore: 'kubernetes', prefix: 'fk', kube, pools }));
});

const reaches = (cluster: WorkloadCluster, from: Netns, to: string) =>
  cluster.topology.exec(from, ['ping', '-c', '1', '-W', '1', to]).status === 0;

const natRules = (cluster: WorkloadCluster, on: Netns) =>
  cluster.topology.exec(on, [nftBinary(), 'list', 'table', 'inet', 'netplug']).stdout;

for (const datastore of ['etcdv3', 'kubernetes'] as const)
  test.serial(
    `${datastore}: a floating IP reaches its pod from a pod on another node, its node and itself; once the pod goes, nothing`,
    async (t) => {
      const cluster = clusters.get(datastore) as WorkloadCluster;
      const [n1, n2] = cluster.nodes;
      const server = await cluster.addPod(n2, 'server', { ...inPlain, [ANNOTATIONS.floatingIPs]: JSON.stringify([FLOATING_IP]) });
      const client = await cluster.addPod(n1, 'client', inPlain);
      // A host route, as `ip route` shows it: no /32.
      const route = `${FLOATING_IP} via ${n2.address} dev eth0`;
      await cluster.routesBecome(n1, `routes the floating IP to n2 (${route})`, (routes) => routes.includes(route));
      const dnat = `ip daddr ${FLOATING_IP} dnat ip to ${server.address}`;
      await eventually(`n2 forwards ${FLOATING_IP} to the pod`, () => natRules(cluster, n2.netns).includes(dnat)).catch((err: Error) => {
        throw new Error(`${err.message}; table: ${natRules(cluster, n2.netns)}; log: ${n2.log().slice(-3000)}`);
      });
      t.false(natRules(cluster, n1.netns).includes(FLOATING_IP), 'only the pod’s node forwards it');
      await eventually('the pod on n1 reaches the pod on n2 through its floating IP', () => reaches(cluster, client.netns, FLOATING_IP));
      t.true(reaches(cluster, n2.netns, FLOATING_IP), 'n2 itself reaches it (the output hook)');
      t.true(reaches(cluster, server.netns, FLOATING_IP), 'the pod reaches its own floating IP');

      await cluster.deletePod(server);
      await cluster.routesBecome(n1, 'no route to the floating IP', (routes) => !routes.some((r) => r.startsWith(`${FLOATING_IP} `)));
      await eventually('n2 forwards it no more', () => !natRules(cluster, n2.netns).includes(FLOATING_IP));
      t.false(reaches(cluster, client.netns, FLOATING_IP));
      await cluster.deletePod(client);
    },
  );
