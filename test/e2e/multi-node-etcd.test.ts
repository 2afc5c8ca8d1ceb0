// netplug installed from deploy/manifests/netplug-etcd.yaml (etcd datastore) on three real nodes
// on two subnets: pods, Services and nodes reach each other across them (test/e2e/multi-node.ts).
import test from 'ava';

import { multiNodeScenario } from './multi-node.ts';

multiNodeScenario(test, 'etcdv3');
