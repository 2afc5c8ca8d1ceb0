// v3.30.0 installed by the manifest on etcd (spec "Upgrade: manifest install with an etcd datastore"),
// upgraded to this release with the procedure's literal commands
// under the real kubelet (literal-upgrade.ts).
import test from 'ava';

import { literalUpgrade } from './literal-upgrade.ts';

literalUpgrade(test, 'manifest-etcd');
