// netplugctl version against a real etcd (the Kubernetes datastore: test/node/node-kubernetes.test.ts),
// the cluster's version as the lowest release the nodes record, and the rule that a netplugctl
// older than the cluster does not write unless told to.
import test from 'ava';

import { CLUSTER_INFO_KEY } from '../../ts/model/cluster-information.ts';
import { ensureClusterInfo } from '../../ts/ipam/cluster-info.ts';
import { keys } from '../../ts/model/keys.ts';
import { recordVersion } from '../../ts/node/startup/record-version.ts';
import { openStore } from '../../ts/store/open.ts';
import { NETPLUG_VERSION } from '../../ts/version.ts';
import { hasStackTrace } from '../helpers/cni.ts';
import { startEtcd } from '../helpers/etcd.ts';
import { ctl, ctlOk } from '../helpers/ipam.ts';

test('version: the client alone, the cluster unknown, then the cluster as netplug-node recorded it', async (t) => {
  const etcd = await startEtcd(t);
  t.is(ctlOk(t, etcd, 'version', '--client').stdout, `Client Version:    ${NETPLUG_VERSION}\n`);
  t.deepEqual(ctlOk(t, etcd, 'version', '--client', '-o', 'json').json, { clientVersion: NETPLUG_VERSION });

  const unknown = ctl(etcd, 'version');
  t.is(unknown.status, 1);
  t.is(unknown.stdout, `Client Version:    ${NETPLUG_VERSION}\n`);
  t.is(
    unknown.stderr,
    `netplugctl: the cluster's version is unknown: etcd at ${etcd.endpoints} has no ClusterInformation "default" (${CLUSTER_INFO_KEY}); netplug-node has not started on any node yet, or netplug is not installed\n`,
  );

  const store = await openStore({ etcd_endpoints: etcd.endpoints });
  t.teardown(() => store.close());
  await ensureClusterInfo(store, 'v3.31.7', 'k8s,bgp');
  t.is(ctlOk(t, etcd, 'version').stdout, `Client Version:    ${NETPLUG_VERSION}\nCluster Version:   v3.31.7\nCluster Type:      k8s,bgp\n`);

  // Two agents record different releases, a third node none (an agent from before records):
  // the cluster's version is the lowest, and each node's is listed.
  t.is(await recordVersion('etcdv3', store, undefined, 'node-a', 'v3.31.7'), 'recorded');
  t.is(await recordVersion('etcdv3', store, undefined, 'node-b', 'v3.31.2'), 'recorded');
  t.is(await recordVersion('etcdv3', store, undefined, 'node-b', 'v3.31.2'), 'unchanged');
  ctlOk(t, etcd, 'node', 'create', 'node-c', '--label', 'zone=a', '--allow-version-mismatch');
  t.like(await ensureClusterInfo(store, 'v3.31.7', 'k8s,bgp'), { netplugVersion: 'v3.31.2' });
  t.is(
    ctlOk(t, etcd, 'version').stdout,
    `Client Version:    ${NETPLUG_VERSION}\nCluster Version:   v3.31.2\nCluster Type:      k8s,bgp\n\n` +
      'NODE    VERSION\nnode-a  v3.31.7\nnode-b  v3.31.2\nnode-c  (none recorded)\n',
  );
  t.deepEqual(ctlOk(t, etcd, 'version', '-o', 'json').json, {
    clientVersion: NETPLUG_VERSION,
    clusterVersion: 'v3.31.2',
    clusterType: 'k8s,bgp',
    nodes: [
      { name: 'node-a', version: 'v3.31.7' },
      { name: 'node-b', version: 'v3.31.2' },
      { name: 'node-c', version: null },
    ],
  });
  // Recording kept what the Node resource held besides (its labels).
  t.is(await recordVersion('etcdv3', store, undefined, 'node-c', 'v3.31.7'), 'recorded');
  t.like((await store.get(keys.node('node-c')))?.value, { metadata: { labels: { zone: 'a' } }, status: { netplugVersion: 'v3.31.7' } });

  await etcd.stop();
  const down = ctl(etcd, 'version');
  t.is(down.status, 1);
  t.is(down.stdout, `Client Version:    ${NETPLUG_VERSION}\n`);
  t.regex(down.stderr, /^netplugctl: cannot read the cluster's version: no etcd endpoint could be reached .*\n$/);
  t.false(hasStackTrace(down.stderr));
});

test('a netplugctl older than the cluster does not write, unless --allow-version-mismatch; reads and newer clients are fine', async (t) => {
  const etcd = await startEtcd(t);
  // No ClusterInformation: nothing to compare with.
  ctlOk(t, etcd, 'pool', 'create', 'before', '--cidr', '10.60.0.0/16');

  const store = await openStore({ etcd_endpoints: etcd.endpoints });
  t.teardown(() => store.close());
  await ensureClusterInfo(store, 'v3.31.0-0.dev+abc', 'k8s');
  ctlOk(t, etcd, 'pool', 'create', 'same', '--cidr', '10.61.0.0/16');
  await ensureClusterInfo(store, 'v3.30.9', 'k8s');
  ctlOk(t, etcd, 'pool', 'create', 'older-cluster', '--cidr', '10.62.0.0/16');

  await ensureClusterInfo(store, 'v3.32.1', 'k8s');
  const message = `netplugctl: netplugctl ${NETPLUG_VERSION} is older than the cluster's netplug v3.32.1: use netplugctl v3.32.1 or newer, or add --allow-version-mismatch to write anyway\n`;
  for (const write of [
    ['pool', 'create', 'newer-cluster', '--cidr', '10.63.0.0/16'],
    ['pool', 'update', 'before', '--disable'],
    ['pool', 'delete', 'before'],
    ['node', 'create', 'n1'],
    ['node', 'delete', 'n1'],
    ['ipam', 'release', '--ip', '10.60.0.1'],
  ]) {
    const refused = ctl(etcd, ...write);
    t.is(refused.status, 1, write.join(' '));
    t.is(refused.stdout, '');
    t.is(refused.stderr, message, write.join(' '));
  }
  const pools = () => (ctlOk(t, etcd, 'pool', 'list', '-o', 'json').json as { pools: { name: string; disabled: boolean }[] }).pools;
  t.deepEqual(
    pools().map((p) => [p.name, p.disabled]),
    [
      ['before', false],
      ['older-cluster', false],
      ['same', false],
    ],
  );
  ctlOk(t, etcd, 'ipam', 'show');

  ctlOk(t, etcd, '--allow-version-mismatch', 'pool', 'update', 'before', '--disable');
  ctlOk(t, etcd, 'node', 'create', 'n1', '--allow-version-mismatch');
  t.true(pools().find((p) => p.name === 'before')?.disabled);
  t.deepEqual(ctlOk(t, etcd, 'node', 'list', '-o', 'json').json, { nodes: [{ name: 'n1', labels: {} }] });
});
