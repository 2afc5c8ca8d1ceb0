// The truth table (truth-table.ts) on the Kubernetes datastore: a real kube-apiserver, netplug-node
// from source following it, netplug's policies as custom resources (real-cluster.ts). 100 worlds.
import test from 'ava';

import { startRealCluster } from './real-cluster.ts';
import { truthTableSuite } from './truth-table.ts';

truthTableSuite(test, { start: (shared) => startRealCluster(shared, 'kubernetes'), cases: 100, seedOffset: 0 });
