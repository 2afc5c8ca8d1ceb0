// netplug installed from deploy/manifests/netplug.yaml (Kubernetes datastore) on a real node.
import test from 'ava';

import { installScenario } from './scenario.ts';

installScenario(test, 'kubernetes');
