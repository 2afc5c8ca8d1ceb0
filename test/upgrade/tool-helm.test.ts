// netplugctl upgrade under the real kubelet for v3.30.0 installed by helm (the chart as a package, helm from scripts/helm.sh):
// plan, apply killed once in each step and resumed, the checks, status, rollback (tool-e2e.ts).
import test from 'ava';

import { toolUpgrade } from './tool-e2e.ts';

toolUpgrade(test, 'helm');
