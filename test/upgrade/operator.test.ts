// v3.30.0 installed by the operator's manifests (spec "Upgrade: operator install"),
// upgraded to this release with the procedure's literal commands
// under the real kubelet (literal-upgrade.ts).
import test from 'ava';

import { literalUpgrade } from './literal-upgrade.ts';

literalUpgrade(test, 'operator');
