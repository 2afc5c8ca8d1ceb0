// What a routing pass reads from a real etcd: nodes with their published addresses, blocks with
// their affinities, borrowed addresses and tunnel handles, pools. A broken document costs only
// itself: it is named (kind, key, field) and the rest is still routed.
import test from 'ava';

import { assignOrdinal, newBlock } from '../../ts/ipam/block.ts';
import { API_VERSION } from '../../ts/model/entry.ts';
import { keys } from '../../ts/model/keys.ts';
import { poolResource } from '../../ts/model/pool-resource.ts';
import { readCluster } from '../../ts/node/shared/read-cluster.ts';
import { openStore } from '../../ts/store/open.ts';
import { startEtcd } from '../helpers/etcd.ts';

test('nodes, blocks, borrowed and tunnel addresses, pools; broken documents named, the others kept', async (t) => {
  const etcd = await startEtcd(t);
  const store = await openStore({ datastore_type: 'etcdv3', etcd_endpoints: etcd.endpoints });
  t.teardown(() => store.close());
  const node = (name: string, spec: unknown) => ({
    key: keys.node(name),
    create: { kind: 'Node', apiVersion: API_VERSION, metadata: { name, creationTimestamp: '', labels: { zone: name } }, spec },
  });
  const block = newBlock('10.244.1.0/26', 'host:b', new Date());
  assignOrdinal(block, 0, { handle_id: 'vxlan-tunnel-addr-b', secondary: { node: 'b', type: 'vxlanTunnelAddress' } });
  assignOrdinal(block, 5, { handle_id: 'net.c1', secondary: { node: 'c' } });
  const good = poolResource('good', { cidr: '10.244.0.0/16', 'vxlan-mode': 'Always' }, new Date());
  t.true(
    await store.commit([
      node('b', { bgp: { ipv4Address: '10.0.0.2/24' }, ipv4VXLANTunnelAddr: '10.244.1.0', vxlanTunnelMACAddr: '66:00:00:00:00:0b' }),
      node('c', { bgp: { ipv4Address: '10.0.0.3' } }),
      { key: keys.block(block.cidr), create: block },
      { key: keys.block('10.244.2.0/26'), create: { cidr: '10.244.2.0/26', allocations: 'no' } },
      { key: keys.pool('good'), create: good },
      { key: keys.pool('bad'), create: { ...good, metadata: { name: 'bad' }, spec: { ...good.spec, vxlanMode: 'Sometimes' } } },
    ]),
  );
  const cluster = await readCluster(store);
  t.deepEqual(
    cluster.nodes.map(({ name, address, vxlanTunnelAddr, vxlanMac, labels }) => ({ name, address, vxlanTunnelAddr, vxlanMac, labels })),
    [
      {
        name: 'b',
        address: { address: '10.0.0.2', prefixLength: 24 },
        vxlanTunnelAddr: '10.244.1.0',
        vxlanMac: '66:00:00:00:00:0b',
        labels: { zone: 'b' },
      },
    ],
  );
  t.deepEqual(cluster.blocks, [{ cidr: '10.244.1.0/26', node: 'b', borrowed: [{ address: '10.244.1.5', node: 'c' }] }]);
  t.deepEqual([...cluster.tunnelAddresses], [['vxlan-tunnel-addr-b', ['10.244.1.0']]]);
  t.deepEqual(
    cluster.pools.map((p) => p.name),
    ['good'],
  );
  t.is(cluster.broken.length, 3);
  t.true(
    cluster.broken.some((m) =>
      /Node "c".*field "spec\.bgp\.ipv4Address" must be an IPv4 address with its prefix length, got "10\.0\.0\.3"/.test(m),
    ),
  );
  t.true(cluster.broken.some((m) => /IPAMBlock "10\.244\.2\.0-26".*field "attributes" must be a list/.test(m)));
  t.true(
    cluster.broken.some((m) => /IPPool "bad".*field "spec\.vxlanMode" must be one of Never, Always, CrossSubnet, got "Sometimes"/.test(m)),
  );
});
