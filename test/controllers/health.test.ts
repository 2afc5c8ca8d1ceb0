// /livez and /readyz: ready only once the first passes are done and while both the
// datastore and the API server answer. The API server is reached through a TCP relay this test
// opens and closes; the datastore (etcd) is stopped and started again.
import test from 'ava';

import { runControllersMain } from '../../ts/controllers/main.ts';
import { tempDir } from '../helpers/cni.ts';
import { startEtcd } from '../helpers/etcd.ts';
import { startKube } from '../helpers/kube.ts';
import { kubeconfigThrough, startRelay } from '../helpers/relay.ts';
import { eventually } from '../helpers/eventually.ts';
import { CONTROLLER_ETCD_RULES, CONTROLLER_RULES, controllersIdentity, leaseNamespaceOf, startControllers, status } from './fixtures.ts';

test('readiness: 503 until the first passes and while the API server or the datastore is unreachable; liveness 200', async (t) => {
  const [kube, etcd] = await Promise.all([startKube(t), startEtcd(t)]);
  const identity = await controllersIdentity(kube, 'netplug-kube-controllers-health', CONTROLLER_RULES);
  const api = await startRelay(t, Number(new URL(kube.server.url).port), { closed: true });
  const kubeconfig = kubeconfigThrough(api, identity.kubeconfig, kube.server.url, tempDir(t, 'kubeconfig'));

  // Started with the API server unreachable: never synced, not ready; but live.
  const controllers = await startControllers(t, {
    DATASTORE_TYPE: 'etcdv3',
    ETCD_ENDPOINTS: etcd.endpoints,
    KUBECONFIG: kubeconfig,
    LEADER_ELECTION_NAMESPACE: leaseNamespaceOf(identity),
  });
  await eventually('the health server answers', async () => (await status(`${controllers.health}/livez`)).code === 200);
  const before = await status(`${controllers.health}/readyz`);
  t.is(before.code, 503);
  t.regex(before.text, /Kubernetes API server/);
  t.regex(before.text, /has not completed its first pass/);

  await api.open();
  await eventually('ready once the API server answers', async () => (await status(`${controllers.health}/readyz`)).code === 200);

  await api.close();
  await eventually(
    'not ready while the API server is unreachable',
    async () => (await status(`${controllers.health}/readyz`)).code === 503,
  );
  await api.open();
  await eventually('ready again', async () => (await status(`${controllers.health}/readyz`)).code === 200);

  await etcd.stop();
  await eventually('not ready while the datastore is unreachable', async () => {
    const { code, text } = await status(`${controllers.health}/readyz`);
    return code === 503 && text.includes('the datastore');
  });
  t.is((await status(`${controllers.health}/livez`)).code, 200, 'still live');
  await etcd.start();
  await eventually('ready again with the datastore back', async () => (await status(`${controllers.health}/readyz`)).code === 200);
  t.is(await controllers.stop(), 0);
});

test('ready on etcd with no workload endpoint at all: the workloadendpoint controller completes its first pass', async (t) => {
  const [kube, etcd] = await Promise.all([startKube(t), startEtcd(t)]);
  const identity = await controllersIdentity(kube, 'netplug-kube-controllers-no-endpoints', [
    ...CONTROLLER_RULES,
    ...CONTROLLER_ETCD_RULES,
  ]);
  // The manifests' set on etcd, whose own pod is in the host's network: no endpoint to list.
  const controllers = await startControllers(t, {
    DATASTORE_TYPE: 'etcdv3',
    ETCD_ENDPOINTS: etcd.endpoints,
    KUBECONFIG: identity.kubeconfig,
    LEADER_ELECTION_NAMESPACE: leaseNamespaceOf(identity),
    ENABLED_CONTROLLERS: 'node,ipam,policy,profile,workloadendpoint',
  });
  await eventually('ready', async () => (await status(`${controllers.health}/readyz`)).code === 200, { timeoutMs: 60_000 });
  t.is((await status(`${controllers.health}/readyz`)).code, 200);
  t.is(await controllers.stop(), 0);
});

test('bad settings: exit 1 with a line naming the variable and its value', async (t) => {
  for (const [env, message] of [
    [{ LEAK_GRACE_PERIOD: '15 minutes' }, /LEAK_GRACE_PERIOD "15 minutes" is not a duration/],
    [{ ENABLED_CONTROLLERS: 'node,bgp' }, /ENABLED_CONTROLLERS names "bgp": not one of node, ipam, policy, profile, workloadendpoint/],
    [{ DATASTORE_TYPE: 'consul' }, /DATASTORE_TYPE "consul" is not known/],
    [{ NETPLUG_CONTROLLERS_HEALTH_ADDR: 'localhost' }, /NETPLUG_CONTROLLERS_HEALTH_ADDR "localhost" must be host:port/],
  ] as const) {
    const lines: string[] = [];
    const code = await runControllersMain([], { KUBECONFIG: '/nonexistent', ...env }, new AbortController().signal, {
      writeLog: (line) => lines.push(line),
    });
    t.is(code, 1);
    t.is(lines.length, 1);
    t.regex(lines[0] ?? '', / ERROR cannot start: /);
    t.regex(lines[0] ?? '', message);
  }
});
