// netplug-install in a pod, against a real kube-apiserver: its identity (a ServiceAccount token in
// a service-account dir, as the kubelet projects it) holds exactly INSTALLER_RULES. The template
// comes from the ConfigMap; the plugin's kubeconfig carries a TokenRequest token of
// netplug-cni-plugin that works with the shipped plugin RBAC; the token is refreshed; a ConfigMap
// edit rewrites the conflist; on SIGTERM it uninstalls only when the DaemonSet is gone or going.
import { existsSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';

import test from 'ava';
import * as k8s from '@kubernetes/client-node';

import { openKubeClient } from '../../ts/k8s/client.ts';
import { createPod, startKube, type Kube } from '../helpers/kube.ts';
import { sharedTeardowns } from '../helpers/shared.ts';
import { eventually } from '../helpers/eventually.ts';
import { createDaemonSet, install, makeNode, type Node, podNamespace } from './helpers.ts';

let kube: Kube;
let apps: k8s.AppsV1Api;
const shared = sharedTeardowns(test);

test.before(async () => {
  kube = await startKube(shared);
  const config = kube.config;
  apps = config.makeApiClient(k8s.AppsV1Api);
});

const TEMPLATE = (logLevel: string) =>
  JSON.stringify({
    name: 'k8s-pod-network',
    cniVersion: '0.3.1',
    plugins: [
      {
        type: 'netplug',
        log_level: logLevel,
        datastore_type: '__DATASTORE_TYPE__',
        nodename: '__KUBERNETES_NODE_NAME__',
        mtu: '__CNI_MTU__',
        ipam: { type: 'netplug-ipam' },
        kubernetes: { kubeconfig: '__KUBECONFIG_FILEPATH__' },
      },
      { type: 'portmap', snat: true, capabilities: { portMappings: true } },
    ],
  }).replace('"__CNI_MTU__"', '__CNI_MTU__');

const setTemplate = async (namespace: string, text: string, create = false) => {
  const body = { metadata: { name: 'netplug-config', namespace }, data: { cni_network_config: text, veth_mtu: '0' } };
  if (create) await kube.core.createNamespacedConfigMap({ namespace, body });
  else await kube.core.replaceNamespacedConfigMap({ name: 'netplug-config', namespace, body });
};

const conflist = (node: Node) => JSON.parse(readFileSync(node.path('/etc/cni/net.d/10-netplug.conflist'), 'utf8'));
const kubeconfigToken = (node: Node) => /token: "([^"]+)"/.exec(readFileSync(node.path('/etc/cni/net.d/netplug-kubeconfig'), 'utf8'))?.[1];
const tokenSubject = (token: string | undefined) => JSON.parse(Buffer.from((token ?? '').split('.')[1] ?? '', 'base64url').toString()).sub;

/** Starts a long-running installer (SLEEP true); resolves once it is ready (--check); stop() aborts it and resolves to its exit code. */
async function startInstaller(node: Node, env: NodeJS.ProcessEnv, informers: { watchTimeoutMs?: number } = {}) {
  const stop = new AbortController();
  let finished = false;
  const exit = install(node, { SLEEP: 'true', ...env }, stop.signal, [], informers).finally(() => {
    finished = true;
  });
  await eventually('the installer to be ready', async () => finished || (await install(node, env, undefined, ['--check'])) === 0);
  if (finished) throw new Error(`the installer exited with ${await exit}:\n${node.log.join('\n')}`);
  return {
    exit,
    stop: () => {
      stop.abort();
      return exit;
    },
  };
}

test('from the ConfigMap: the conflist, and a kubeconfig that works as netplug-cni-plugin with the shipped plugin RBAC', async (t) => {
  const pod = await podNamespace(kube, t);
  await setTemplate(pod.namespace, TEMPLATE('debug'), true);
  const node = makeNode(t);
  t.is(await install(node, { ...pod.env, CNI_MTU: '0' }), 0, node.log.join('\n'));
  t.like(conflist(node).plugins[0], {
    log_level: 'debug',
    datastore_type: 'kubernetes',
    nodename: 'node-a',
    kubernetes: { kubeconfig: '/etc/cni/net.d/netplug-kubeconfig' },
  });
  t.false('mtu' in conflist(node).plugins[0]);
  t.true(
    node.log.some((line) =>
      line.includes(`INFO wrote /etc/cni/net.d/10-netplug.conflist from ConfigMap ${pod.namespace}/netplug-config key cni_network_config`),
    ),
  );

  const kubeconfig = node.path('/etc/cni/net.d/netplug-kubeconfig');
  t.is(statSync(kubeconfig).mode & 0o7777, 0o600);
  const token = kubeconfigToken(node);
  t.is(tokenSubject(token), `system:serviceaccount:${pod.namespace}:netplug-cni-plugin`);
  t.false(node.log.join('\n').includes(token ?? 'no token'), 'the token is never logged');
  const payload = JSON.parse(Buffer.from((token ?? '').split('.')[1] ?? '', 'base64url').toString());
  t.is(payload.exp - payload.iat, 86400);

  // The plugin's own lean client, reading a pod as the plugin does on ADD.
  const target = await createPod(kube, { labels: { app: 'web' } });
  const client = await openKubeClient({ kubeconfig });
  t.teardown(() => client.close());
  const read = await client.get<k8s.V1Pod>(`/api/v1/namespaces/${target.namespace}/pods/${target.name}`, 'get pods');
  t.is(read?.metadata?.labels?.['app'], 'web');
  // And nothing more: the shipped role does not give secrets.
  const config = new k8s.KubeConfig();
  config.loadFromFile(kubeconfig);
  const asPlugin = config.makeApiClient(k8s.CoreV1Api);
  t.is((await asPlugin.readNamespacedPod({ name: target.name, namespace: target.namespace })).metadata?.name, target.name);
  const refused = await asPlugin.listNamespacedSecret({ namespace: pod.namespace }).then(
    () => 0,
    (err: k8s.ApiException<unknown>) => err.code,
  );
  t.is(refused, 403);
});

test('with SKIP_TLS_VERIFY=true the kubeconfig skips verification instead of naming the CA', async (t) => {
  const pod = await podNamespace(kube, t);
  const node = makeNode(t, { netplug: 0o755 });
  t.is(await install(node, { ...pod.env, NETPLUG_CONFIG_MAP: '', SKIP_TLS_VERIFY: 'true' }), 0, node.log.join('\n'));
  const text = readFileSync(node.path('/etc/cni/net.d/netplug-kubeconfig'), 'utf8');
  t.true(text.includes('insecure-skip-tls-verify: true'));
  t.false(text.includes('certificate-authority-data'));
  t.true(text.includes(`server: "https://127.0.0.1:${new URL(kube.server.url).port}"`));
});

test('running: the token is refreshed, a ConfigMap edit rewrites the conflist, a bad edit keeps it; SIGTERM with the DaemonSet present leaves all', async (t) => {
  const pod = await podNamespace(kube, t);
  await setTemplate(pod.namespace, TEMPLATE('info'), true);
  await createDaemonSet(apps, pod.namespace);
  const node = makeNode(t);
  // client-node ends a watch that heard nothing for 30 s; 3 s here, so the quiet spell below is short.
  const installer = await startInstaller(node, { ...pod.env, CNI_TOKEN_REFRESH_INTERVAL: '1s' }, { watchTimeoutMs: 3_000 });
  t.teardown(() => installer.stop());

  const first = kubeconfigToken(node);
  await eventually('a refreshed token', () => kubeconfigToken(node) !== first);
  t.is(tokenSubject(kubeconfigToken(node)), `system:serviceaccount:${pod.namespace}:netplug-cni-plugin`);

  await setTemplate(pod.namespace, TEMPLATE('debug'));
  await eventually('the conflist to follow the ConfigMap', () => conflist(node).plugins[0].log_level === 'debug');

  await setTemplate(pod.namespace, '{"plugins": [');
  await eventually('the bad template to be reported', () =>
    node.log.some((line) => / ERROR the CNI network config template from ConfigMap .* is not valid JSON/.test(line)),
  );
  t.is(conflist(node).plugins[0].log_level, 'debug', 'the conflist was kept');

  // Quiet for longer than the watch hears nothing before ending it (twice over): watched again
  // from where it was, without a warning, and an edit after that is still followed.
  await new Promise((resolve) => setTimeout(resolve, 7_000));
  await setTemplate(pod.namespace, TEMPLATE('warning'));
  await eventually('the conflist to follow an edit after the quiet spell', () => conflist(node).plugins[0].log_level === 'warning');
  t.false(
    node.log.some((line) => line.includes('WARNING watching')),
    'the installer identity may list and watch its ConfigMap by name',
  );

  t.is(await installer.stop(), 0, node.log.join('\n'));
  t.true(node.log.some((line) => line.endsWith(`INFO DaemonSet ${pod.namespace}/netplug-node exists: leaving the CNI plugin installed`)));
  t.true(existsSync(node.path('/etc/cni/net.d/10-netplug.conflist')));
  t.true(existsSync(node.path('/etc/cni/net.d/netplug-kubeconfig')));
  t.true(existsSync(node.path('/opt/cni/bin/netplug')));
  t.is(await install(node, pod.env, undefined, ['--check']), 0);
});

test('NETPLUG_CONFIG_MAP_KEY names the key holding the template (the operator ConfigMap calls it config), also when watched', async (t) => {
  const pod = await podNamespace(kube, t);
  const setConfig = async (text: string, create = false) => {
    const body = { metadata: { name: 'netplug-config', namespace: pod.namespace }, data: { config: text } };
    if (create) await kube.core.createNamespacedConfigMap({ namespace: pod.namespace, body });
    else await kube.core.replaceNamespacedConfigMap({ name: 'netplug-config', namespace: pod.namespace, body });
  };
  await setConfig(TEMPLATE('warning'), true);
  await createDaemonSet(apps, pod.namespace);
  const node = makeNode(t);
  const installer = await startInstaller(node, { ...pod.env, NETPLUG_CONFIG_MAP_KEY: 'config' });
  t.teardown(() => installer.stop());
  t.is(conflist(node).plugins[0].log_level, 'warning');
  t.true(node.log.some((line) => line.includes(`from ConfigMap ${pod.namespace}/netplug-config key config`)));
  await setConfig(TEMPLATE('debug'));
  await eventually('the conflist to follow the key', () => conflist(node).plugins[0].log_level === 'debug');
  t.is(await installer.stop(), 0, node.log.join('\n'));
});

test('SIGTERM with the DaemonSet gone uninstalls what was installed, and only that', async (t) => {
  const pod = await podNamespace(kube, t);
  const node = makeNode(t);
  const installer = await startInstaller(node, { ...pod.env, NETPLUG_CONFIG_MAP: '' });
  t.teardown(() => installer.stop());
  t.true(existsSync(node.path('/etc/cni/net.d/netplug-kubeconfig')));
  writeFileSync(node.path('/opt/cni/bin/bridge'), 'not netplug');
  writeFileSync(node.path('/etc/cni/net.d/99-other.conflist'), '{}');

  t.is(await installer.stop(), 0, node.log.join('\n'));
  t.true(
    node.log.some((line) => line.includes(`INFO DaemonSet ${pod.namespace}/netplug-node: HTTP 404`)),
    node.log.join('\n'),
  );
  t.deepEqual(readdirSync(node.path('/opt/cni/bin')), ['bridge']);
  t.deepEqual(readdirSync(node.path('/etc/cni/net.d')), ['99-other.conflist']);
  t.false(existsSync(node.path('/var/lib/netplug/cni-installed.json')));
  t.is(await install(node, pod.env, undefined, ['--check']), 1);
});

test('SIGTERM while the DaemonSet is being deleted uninstalls', async (t) => {
  const pod = await podNamespace(kube, t);
  // A finalizer holds the DaemonSet in deletion, as foreground deletion of its pods would.
  const finalizer = 'netplug.test/hold';
  await createDaemonSet(apps, pod.namespace, [finalizer]);
  t.teardown(() =>
    apps
      .patchNamespacedDaemonSet({ name: 'netplug-node', namespace: pod.namespace, body: [{ op: 'remove', path: '/metadata/finalizers' }] })
      .catch(() => {}),
  );
  const node = makeNode(t, { netplug: 0o755 });
  const installer = await startInstaller(node, { ...pod.env, NETPLUG_CONFIG_MAP: '' });
  t.teardown(() => installer.stop());
  await apps.deleteNamespacedDaemonSet({ name: 'netplug-node', namespace: pod.namespace });
  t.is(await installer.stop(), 0, node.log.join('\n'));
  t.true(
    node.log.some((line) =>
      line.endsWith(
        `INFO DaemonSet ${pod.namespace}/netplug-node: being deleted, so netplug is being removed: uninstalling the CNI plugin`,
      ),
    ),
  );
  t.false(existsSync(node.path('/opt/cni/bin/netplug')));
  t.false(existsSync(node.path('/etc/cni/net.d/10-netplug.conflist')));
});

test('SIGTERM after the installer ServiceAccount was deleted (401) uninstalls', async (t) => {
  const pod = await podNamespace(kube, t);
  await createDaemonSet(apps, pod.namespace);
  const node = makeNode(t, { netplug: 0o755 });
  const installer = await startInstaller(node, { ...pod.env, NETPLUG_CONFIG_MAP: '' });
  t.teardown(() => installer.stop());
  await kube.core.deleteNamespacedServiceAccount({ name: 'netplug-node', namespace: pod.namespace });
  // The API server caches a token's authentication for a few seconds: wait until it refuses it.
  const asInstaller = new k8s.KubeConfig();
  asInstaller.loadFromClusterAndUser(
    { name: 'test', server: kube.server.url, caFile: kube.server.ca, skipTLSVerify: false },
    { name: 'installer', token: readFileSync(`${pod.saDir}/token`, 'utf8') },
  );
  const asInstallerApps = asInstaller.makeApiClient(k8s.AppsV1Api);
  await eventually('the deleted account to be refused', () =>
    asInstallerApps.readNamespacedDaemonSet({ name: 'netplug-node', namespace: pod.namespace }).then(
      () => false,
      (err: k8s.ApiException<unknown>) => err.code === 401,
    ),
  );
  t.is(await installer.stop(), 0, node.log.join('\n'));
  t.true(
    node.log.some((line) => line.includes(`INFO DaemonSet ${pod.namespace}/netplug-node: HTTP 401`)),
    node.log.join('\n'),
  );
  t.false(existsSync(node.path('/etc/cni/net.d/10-netplug.conflist')));
});

test('SIGTERM after the installer lost its RBAC (403) uninstalls', async (t) => {
  const pod = await podNamespace(kube, t);
  await createDaemonSet(apps, pod.namespace);
  const node = makeNode(t, { netplug: 0o755 });
  const installer = await startInstaller(node, { ...pod.env, NETPLUG_CONFIG_MAP: '' });
  t.teardown(() => installer.stop());
  await kube.rbac.deleteNamespacedRoleBinding({ name: 'netplug-install', namespace: pod.namespace });
  await eventually('the binding to be gone', async () => {
    const review = await kube.core.createNamespacedServiceAccountToken({
      name: 'netplug-node',
      namespace: pod.namespace,
      body: { spec: { audiences: [] } },
    });
    const asInstaller = new k8s.KubeConfig();
    asInstaller.loadFromClusterAndUser(
      { name: 'test', server: kube.server.url, caFile: kube.server.ca, skipTLSVerify: false },
      { name: 'installer', token: review.status?.token ?? '' },
    );
    return asInstaller
      .makeApiClient(k8s.AppsV1Api)
      .readNamespacedDaemonSet({ name: 'netplug-node', namespace: pod.namespace })
      .then(
        () => false,
        (err: k8s.ApiException<unknown>) => err.code === 403,
      );
  });
  t.is(await installer.stop(), 0, node.log.join('\n'));
  t.true(
    node.log.some((line) => line.includes(`INFO DaemonSet ${pod.namespace}/netplug-node: HTTP 403`)),
    node.log.join('\n'),
  );
  t.false(existsSync(node.path('/etc/cni/net.d/10-netplug.conflist')));
});

test('restarted after its RBAC was deleted (403): the refused install waits for SIGTERM, then uninstalls what the last run installed', async (t) => {
  const pod = await podNamespace(kube, t);
  await createDaemonSet(apps, pod.namespace);
  const node = makeNode(t, { netplug: 0o755 });
  t.is(await install(node, { ...pod.env, NETPLUG_CONFIG_MAP: '' }), 0, node.log.join('\n'));
  t.true(existsSync(node.path('/etc/cni/net.d/10-netplug.conflist')));
  // The manifest's RBAC goes first: a container started again in that window is refused.
  await kube.rbac.deleteNamespacedRoleBinding({ name: 'netplug-install', namespace: pod.namespace });
  const stop = new AbortController();
  const exit = install(node, { ...pod.env, NETPLUG_CONFIG_MAP: '', SLEEP: 'true' }, stop.signal);
  t.teardown(() => stop.abort());
  await eventually('the install to be refused', async () => node.log.some((line) => /ERROR install failed: HTTP 403/.test(line)));
  t.true(existsSync(node.path('/etc/cni/net.d/10-netplug.conflist')), 'nothing removed before the SIGTERM');
  stop.abort();
  t.is(await exit, 0, node.log.join('\n'));
  t.true(
    node.log.some((line) => line.includes(`INFO DaemonSet ${pod.namespace}/netplug-node: HTTP 403`)),
    node.log.join('\n'),
  );
  t.false(existsSync(node.path('/etc/cni/net.d/10-netplug.conflist')));
  t.false(existsSync(node.path('/opt/cni/bin/netplug')));
});

test('with KUBECONFIG (outside a pod): that identity, the namespace from POD_NAMESPACE, the server and CA from the file', async (t) => {
  const pod = await podNamespace(kube, t);
  await setTemplate(pod.namespace, TEMPLATE('warning'), true);
  const node = makeNode(t, { netplug: 0o755 });
  t.is(
    await install(node, { KUBECONFIG: kube.server.admin.kubeconfig, POD_NAMESPACE: pod.namespace, NETPLUG_CONFIG_MAP: 'netplug-config' }),
    0,
    node.log.join('\n'),
  );
  t.is(conflist(node).plugins[0].log_level, 'warning');
  const text = readFileSync(node.path('/etc/cni/net.d/netplug-kubeconfig'), 'utf8');
  t.true(text.includes(`server: "${kube.server.url}"`));
  t.true(text.includes(`certificate-authority-data: "${readFileSync(kube.server.ca).toString('base64')}"`));
  t.is(tokenSubject(kubeconfigToken(node)), `system:serviceaccount:${pod.namespace}:netplug-cni-plugin`);
});

test('a bad template in the ConfigMap fails the install naming the ConfigMap, and writes nothing', async (t) => {
  const pod = await podNamespace(kube, t);
  await setTemplate(pod.namespace, '{"name": "k8s-pod-network", "plugins": [{"type": "netplug"}', true);
  const node = makeNode(t);
  t.is(await install(node, pod.env), 1);
  t.regex(
    node.log.join('\n'),
    new RegExp(
      `ERROR install failed: the CNI network config template from ConfigMap ${pod.namespace}/netplug-config key cni_network_config is not valid JSON`,
    ),
  );
  t.deepEqual(readdirSync(node.root), []);
});
