// netplugctl upgrade under the real kubelet for v3.30.0 installed by the manifest on etcd (netplugctl run inside the node, where etcd listens):
// plan, apply killed once in each step and resumed, the checks, status, rollback (tool-e2e.ts).
import test from 'ava';

import { toolUpgrade } from './tool-e2e.ts';

toolUpgrade(test, 'manifest-etcd');
