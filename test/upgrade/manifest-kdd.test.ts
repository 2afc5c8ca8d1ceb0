// v3.30.0 installed by the manifest on the Kubernetes datastore (spec "Upgrade: manifest install with the orchestrator API datastore"),
// upgraded to this release with the procedure's literal commands
// under the real kubelet (literal-upgrade.ts).
import test from 'ava';

import { literalUpgrade } from './literal-upgrade.ts';

literalUpgrade(test, 'manifest-kdd');
