// netplugctl version against a real etcd (the Kubernetes datastore: test/node/node-kubernetes.test.ts),
// and the rule that a netplugctl older than the cluster does not write unless told to.
import test from 'ava';

import { compareVersions } from '../../ts/ctl/version.ts';
import { CLUSTER_INFO_KEY } from '../../ts/model/cluster-information.ts';
import { ensureClusterInfo } from '../../ts/ipam/cluster-info.ts';
import { openStore } from '../../ts/store/open.ts';
import { NETPLUG_VERSION } from '../../ts/version.ts';
import { hasStackTrace } from '../helpers/cni.ts';
import { startEtcd } from '../helpers/etcd.ts';
import { ctl, ctlOk } from '../helpers/ipam.ts';

test('versions compare by major, minor, patch; v, -prerelease and +build do not count', (t) => {
  t.is(compareVersions('v3.22.2', '3.22.2'), 0);
  t.is(compareVersions('v3.31.0', 'v3.31.0-rc.1+abc'), 0);
  t.true((compareVersions('v3.31.0', 'v3.31.2') ?? 0) < 0);
  t.true((compareVersions('v3.31.10', 'v3.31.9') ?? 0) > 0);
  t.true((compareVersions('v3.31.0', 'v4.0.0') ?? 0) < 0);
  t.is(compareVersions('v3.31', 'v3.31.0'), undefined);
});

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
