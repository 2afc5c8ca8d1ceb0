// The truth table (truth-table.ts) on the etcd datastore: a real etcd and kube-apiserver,
// netplug-kube-controllers copying NetworkPolicies, namespaces, service accounts and pod labels
// into etcd, netplug's policies written with netplugctl, netplug-node from source following etcd
// (real-cluster.ts). 60 worlds, other than the Kubernetes datastore's (a run stays short).
import test from 'ava';

import { startRealCluster } from './real-cluster.ts';
import { truthTableSuite } from './truth-table.ts';

truthTableSuite(test, { start: (shared) => startRealCluster(shared, 'etcd'), cases: 60, seedOffset: 500 });
