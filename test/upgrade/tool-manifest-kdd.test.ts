// netplugctl upgrade under the real kubelets of a three-node cluster (two nodes on one subnet, the
// third behind a router) for v3.30.0 installed by the manifest on the Kubernetes datastore: plan,
// apply killed once in each step and resumed while the DaemonSet rolls node by node, pings between
// pods on the first and the third node throughout, `netplugctl version` and `upgrade status`
// checked while the nodes run both releases, the checks, status, rollback (tool-e2e.ts,
// workload.ts).
import test from 'ava';

import { toolUpgrade } from './tool-e2e.ts';

toolUpgrade(test, 'manifest-kdd', { nodes: 3 });
