// netplug installed from deploy/manifests/netplug-etcd.yaml (etcd datastore) on a real node.
import test from 'ava';

import { installScenario } from './scenario.ts';

installScenario(test, 'etcdv3');
