// Release versions compared, and the cluster's version as the lowest release the nodes record.
import test from 'ava';

import { clusterVersionOf, compareVersions, lowestVersion, recordedVersionOf } from '../../ts/model/release-versions.ts';
import { nodeEntry } from '../../ts/store/kubernetes/documents.ts';

test('versions compare by major, minor, patch; v, -prerelease and +build do not count', (t) => {
  t.is(compareVersions('v3.22.2', '3.22.2'), 0);
  t.is(compareVersions('v3.31.0', 'v3.31.0-rc.1+abc'), 0);
  t.true((compareVersions('v3.31.0', 'v3.31.2') ?? 0) < 0);
  t.true((compareVersions('v3.31.10', 'v3.31.9') ?? 0) > 0);
  t.true((compareVersions('v3.31.0', 'v4.0.0') ?? 0) < 0);
  t.is(compareVersions('v3.31', 'v3.31.0'), undefined);
  t.is(lowestVersion(['v3.31.10', undefined, 'latest', 'v3.31.9']), 'v3.31.9');
  t.is(lowestVersion([undefined, 'latest']), undefined);
});

test('the cluster version is the lowest release any node records, by version order rather than text', (t) => {
  t.is(clusterVersionOf(['v3.31.10', 'v3.31.9', 'v3.32.0'], 'v3.30.0'), 'v3.31.9');
  t.is(clusterVersionOf(['v3.31.2', 'v3.31.2'], 'v3.31.2', 'v3.31.2'), 'v3.31.2');
  // The agent asking counts whether or not its node could record its release.
  t.is(clusterVersionOf(['v3.31.2'], 'v3.31.2', 'v3.31.1'), 'v3.31.1');
  t.is(clusterVersionOf([], undefined, 'v3.31.0'), 'v3.31.0');
});

test('a node that records no release counts as what ClusterInformation said before, until every node records one', (t) => {
  // Half-upgraded from a release whose agents record nothing: still that release.
  t.is(clusterVersionOf(['v3.31.0', undefined, undefined], 'v3.30.0', 'v3.31.0'), 'v3.30.0');
  // A record that is not a version counts as none.
  t.is(clusterVersionOf(['v3.31.0', 'garbage'], 'v3.30.0'), 'v3.30.0');
  // The last node upgraded.
  t.is(clusterVersionOf(['v3.31.0', 'v3.31.0', 'v3.31.0'], 'v3.30.0', 'v3.31.0'), 'v3.31.0');
  // Nothing said before (a new cluster, or a datastore locked before any agent wrote): the records alone.
  t.is(clusterVersionOf(['v3.31.0', undefined], undefined, 'v3.31.0'), 'v3.31.0');
  t.is(clusterVersionOf([undefined], '', undefined), undefined);
});

test("a node's recorded release: the etcd Node's status.netplugVersion, the Kubernetes Node's annotation", (t) => {
  t.is(recordedVersionOf({ kind: 'Node', status: { netplugVersion: 'v3.31.0' } }), 'v3.31.0');
  for (const none of [{ kind: 'Node' }, { status: null }, { status: { netplugVersion: 3 } }, { status: { netplugVersion: '' } }, null])
    t.is(recordedVersionOf(none), undefined, JSON.stringify(none));
  const node = (annotations: Record<string, string>) => nodeEntry({ metadata: { name: 'n1', resourceVersion: '7', annotations } }).value;
  t.is(recordedVersionOf(node({ 'projectnet.org/netplug-version': 'v3.31.0' })), 'v3.31.0');
  t.is(recordedVersionOf(node({})), undefined);
});
