// netplugctl upgrade under the real kubelet for v3.30.0 installed by the manifest on the Kubernetes
// datastore: plan, apply killed once in each step and resumed, the checks, status, rollback
// (tool-e2e.ts). On one node: the same on three (toolUpgrade's { nodes: 3 }: the DaemonSet rolling
// node by node, pings between the first and the third node, netplugctl version and upgrade status
// checked while the nodes run both releases) passes, but costs npm test some four minutes.
import test from 'ava';

import { toolUpgrade } from './tool-e2e.ts';

toolUpgrade(test, 'manifest-kdd');
