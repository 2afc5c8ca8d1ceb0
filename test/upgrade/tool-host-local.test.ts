// netplugctl upgrade under the real kubelet for v3.30.0 installed by its host-local manifest (the
// init container upgrade-ipam, no USE_POD_CIDR): the host-local step first, then as the others
// (tool-e2e.ts); no address handed out twice.
import test from 'ava';

import { toolUpgrade } from './tool-e2e.ts';

toolUpgrade(test, 'host-local');
