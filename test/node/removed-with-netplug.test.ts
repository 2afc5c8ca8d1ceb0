// netplug-node deletes netplug's table as it stops when netplug is being removed from the cluster
// (its DaemonSet, in POD_NAMESPACE, gone), and only then: stopped while the DaemonSet exists (a
// rolling update, a rollback) the table stays, fail closed, and a pod the agent never programmed
// gets nothing through; stopped once the DaemonSet is deleted, the table and the status files go
// and that pod's connections flow. Real packets between pod namespaces plugged into one node, a
// real kube-apiserver holding the DaemonSet and the Pod objects (policy-node.ts).
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';

import * as k8s from '@kubernetes/client-node';
import test from 'ava';

import { hostInterfaceName } from '../../ts/dataplane/index.ts';
import { statusFileName } from '../../ts/plugin/policy-wait.ts';
import { eventually } from '../helpers/eventually.ts';
import { sharedTeardowns } from '../helpers/shared.ts';
import { createRunningPod, echoListener, plugNetns, type PolicyNode, settles, startPolicyNode } from './policy-node.ts';

const NAMESPACE = `removed-${process.pid}`;
const SYSTEM = `netplug-sys-${process.pid}`;
const shared = sharedTeardowns(test);
let policyNode: PolicyNode;
let apps: k8s.AppsV1Api;

const until = (what: string, check: () => boolean | Promise<boolean>, timeoutMs = 60_000) =>
  eventually(what, check, { timeoutMs, context: () => policyNode.log().split('\n').slice(-30).join('\n') });

const daemonSet: k8s.V1DaemonSet = {
  metadata: { name: 'netplug-node' },
  spec: {
    selector: { matchLabels: { 'k8s-app': 'netplug-node' } },
    template: {
      metadata: { labels: { 'k8s-app': 'netplug-node' } },
      spec: { containers: [{ name: 'netplug-node', image: 'localhost/netplug:test' }] },
    },
  },
};

test.before(async () => {
  policyNode = await startPolicyNode(shared, 'prm');
  const { kube } = policyNode;
  apps = kube.config.makeApiClient(k8s.AppsV1Api);
  for (const name of [NAMESPACE, SYSTEM]) {
    await kube.core.createNamespace({ body: { metadata: { name } } });
    shared.teardown(() => kube.core.deleteNamespace({ name }).catch(() => undefined));
  }
  // What the shipped Role in netplug's namespace grants netplug-node (and install-cni) besides.
  await kube.rbac.createClusterRole({
    body: { metadata: { name: 'netplug-node-daemonset' }, rules: [{ apiGroups: ['apps'], resources: ['daemonsets'], verbs: ['get'] }] },
  });
  await kube.rbac.createClusterRoleBinding({
    body: {
      metadata: { name: 'netplug-node-daemonset' },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'netplug-node-daemonset' },
      subjects: [{ kind: 'User', name: 'netplug-node-policy' }],
    },
  });
  await apps.createNamespacedDaemonSet({ namespace: SYSTEM, body: daemonSet });
  policyNode.agentEnv['POD_NAMESPACE'] = SYSTEM;
});

test.afterEach.always((t) => {
  if (!t.passed) t.log(policyNode.log().split('\n').slice(-40).join('\n'));
});

test.serial(
  'stopped while its DaemonSet exists the table stays, fail closed; stopped once it is deleted, the table and status files go',
  async (t) => {
    const { node, kube } = policyNode;
    const plug = (name: string, address: string) => ({
      name,
      address,
      netns: plugNetns(shared, node, `nprm-${name}-${process.pid}`, address, hostInterfaceName('cali', `${NAMESPACE}.${name}`)),
    });
    const a = plug('a', '10.79.1.10');
    echoListener(shared, a.netns);
    await createRunningPod(kube, { namespace: NAMESPACE, name: 'a', labels: { app: 'a' }, nodeName: node.name, addresses: [a.address] });
    const statusFile = join(policyNode.statusDir, statusFileName('k8s', NAMESPACE, 'a', 'eth0'));
    policyNode.startAgent();
    await until("a's status file", () => existsSync(statusFile), 90_000);

    t.is(await policyNode.stopAgent(), 0);
    t.is(policyNode.nftList().status, 0, 'the table stays while the DaemonSet exists');
    t.regex(policyNode.log(), new RegExp(`DaemonSet ${SYSTEM}/netplug-node exists: keeping netplug's nftables table`));
    // A pod the agent never programmed, as one the previous release's plugin networks after a rollback.
    const c = plug('c', '10.79.1.12');
    t.true(await settles(c, a, false), 'fail closed: c gets nothing through');

    policyNode.startAgent();
    await until('the agent in sync again', () => policyNode.agentGet('/readyz').status === 200, 90_000);
    await apps.deleteNamespacedDaemonSet({ namespace: SYSTEM, name: 'netplug-node' });
    t.is(await policyNode.stopAgent(), 0);
    t.not(policyNode.nftList().status, 0, 'no table inet netplug');
    t.deepEqual(readdirSync(policyNode.statusDir), [], 'no status file');
    t.regex(
      policyNode.log(),
      new RegExp(
        `DaemonSet ${SYSTEM}/netplug-node: .*, so netplug is being removed: deleting netplug's nftables table[\\s\\S]*deleted nftables table inet netplug: netplug is being removed`,
      ),
    );
    t.true(await settles(c, a, true), 'c reaches a');
  },
);
