// Shared informers (ts/runtime/informers.ts) against a real kube-apiserver: one informer and one
// list per resource and selectors whatever the number of handlers; add, update (with the object
// before) and delete; synced, also for a handler added late; updates of status only, or of nothing
// a handler finds significant, not passed on to those who ask; a quiet watch made again from where
// it was (no new list), with client-node's 30 s quiet timeout shortened for the test; a failure
// (the API unreachable) followed by a restart with backoff and a synced cache again.
import * as k8s from '@kubernetes/client-node';
import test from 'ava';

import { type Handler, Informers, type Source } from '../../ts/runtime/informers.ts';
import { tempDir } from '../helpers/cni.ts';
import { createNode, type Kube, startKube } from '../helpers/kube.ts';
import { eventually } from '../helpers/eventually.ts';
import { kubeconfigThrough, startRelay } from '../helpers/relay.ts';
import { sharedTeardowns } from '../helpers/shared.ts';

const shared = sharedTeardowns(test);
let kube: Kube;
let config: k8s.KubeConfig;

test.before(async () => {
  kube = await startKube(shared);
  config = kube.config;
});

const mergePatch = k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch);
const quiet = { info: () => undefined, warning: () => undefined };

/** The Nodes labelled `test=<label>`, with a count of the lists made. */
function nodesOf(core: k8s.CoreV1Api, label: string): Source<k8s.V1Node> & { lists: number } {
  const source = {
    what: `nodes of ${label}`,
    path: '/api/v1/nodes',
    labelSelector: `test=${label}`,
    lists: 0,
    list: () => {
      source.lists++;
      return core.listNode({ labelSelector: `test=${label}` });
    },
  };
  return source;
}

/** A handler that records what it hears, as `<verb> <name> [<label a> <- <label a before>]`. */
function recorder() {
  const heard: string[] = [];
  const a = (node: k8s.V1Node | undefined) => node?.metadata?.labels?.['a'] ?? '-';
  const handler: Handler<k8s.V1Node> = {
    add: (node) => heard.push(`add ${node.metadata?.name}`),
    update: (node, old) => heard.push(`update ${node.metadata?.name} ${a(node)} <- ${a(old)}`),
    delete: (node) => heard.push(`delete ${node.metadata?.name}`),
    synced: () => heard.push('synced'),
    failed: () => heard.push('failed'),
  };
  return { heard, handler };
}

test('one informer and one list per resource and selectors; add, update with the object before, delete; synced, also for a late handler', async (t) => {
  const informers = new Informers(config, { log: quiet });
  t.teardown(() => informers.stop());
  const core = config.makeApiClient(k8s.CoreV1Api);
  const source = nodesOf(core, 'shared');
  await createNode(kube, t, 'shared-1', { test: 'shared', a: '1' });
  const first = informers.informer(source);
  const second = informers.informer(source);
  t.is(first, second, 'the same informer');
  t.not(informers.informer(nodesOf(core, 'other')), first, 'another selector, another informer');
  const [one, two] = [recorder(), recorder()];
  first.addHandler(one.handler);
  second.addHandler(two.handler);
  informers.start();
  await first.whenSynced();
  await eventually('both handlers heard the list', () => one.heard.length === 2 && two.heard.length === 2);
  t.deepEqual(one.heard, ['add shared-1', 'synced']);
  t.deepEqual(two.heard, one.heard);
  t.is(first.get('shared-1')?.metadata?.labels?.['a'], '1');

  await kube.core.patchNode({ name: 'shared-1', body: { metadata: { labels: { a: '2' } } } }, mergePatch);
  await createNode(kube, t, 'shared-2', { test: 'shared' });
  await kube.core.deleteNode({ name: 'shared-2' });
  await eventually('the changes heard', () => one.heard.length === 5);
  t.deepEqual(one.heard.slice(2), ['update shared-1 2 <- 1', 'add shared-2', 'delete shared-2']);
  t.deepEqual(two.heard, one.heard);

  const late = recorder();
  first.addHandler(late.handler);
  await eventually('a handler added after the list is told synced', () => late.heard.length === 1);
  t.deepEqual(late.heard, ['synced']);
  t.is(source.lists, 1, 'one list for every handler');
  t.true(informers.synced());
});

test('a cache keeps its view of each object, listed and watched, and no managedFields; another view is another informer', async (t) => {
  const informers = new Informers(config, { log: quiet });
  t.teardown(() => informers.stop());
  const core = config.makeApiClient(k8s.CoreV1Api);
  const plain = informers.informer(nodesOf(core, 'view'));
  const labelsOnly: Source<k8s.V1Node> = {
    ...nodesOf(core, 'view'),
    view: { name: 'labels', of: (node) => ({ metadata: { name: node.metadata?.name, labels: node.metadata?.labels } }) },
  };
  const viewed = informers.informer(labelsOnly);
  t.not(viewed, plain, 'a view is its own informer');
  await createNode(kube, t, 'view-1', { test: 'view', a: '1' });
  informers.start();
  await viewed.whenSynced();
  await plain.whenSynced();
  t.deepEqual(viewed.get('view-1'), { metadata: { name: 'view-1', labels: { test: 'view', a: '1' } } }, 'listed: the view');
  t.truthy(plain.get('view-1')?.spec, 'the plain cache keeps the object');
  t.is(plain.get('view-1')?.metadata?.managedFields, undefined, 'without managedFields');
  await createNode(kube, t, 'view-2', { test: 'view', a: '2' });
  await eventually('the watched node in both caches', () => viewed.get('view-2') !== undefined && plain.get('view-2') !== undefined);
  t.deepEqual(viewed.get('view-2'), { metadata: { name: 'view-2', labels: { test: 'view', a: '2' } } }, 'watched: the view');
  t.is(plain.get('view-2')?.metadata?.managedFields, undefined);
});

test('updates of status only, or of nothing significant to a handler, are not passed on to it', async (t) => {
  const informers = new Informers(config, { log: quiet });
  t.teardown(() => informers.stop());
  const core = config.makeApiClient(k8s.CoreV1Api);
  await createNode(kube, t, 'status-1', { test: 'status', a: '1' });
  const nodes = informers.informer(nodesOf(core, 'status'));
  const [every, specOnly, labelsOnly] = [recorder(), recorder(), recorder()];
  nodes.addHandler(every.handler);
  nodes.addHandler(specOnly.handler, { ignoreStatusOnly: true });
  nodes.addHandler(labelsOnly.handler, { significant: (node) => node.metadata?.labels });
  informers.start();
  await nodes.whenSynced();

  // A heartbeat: status only.
  const heartbeat = { status: { conditions: [{ type: 'Ready', status: 'True', reason: 'KubeletReady', lastHeartbeatTime: new Date() }] } };
  await kube.core.patchNodeStatus({ name: 'status-1', body: heartbeat as never }, mergePatch);
  await eventually('the status update heard', () => every.heard.length === 3);
  // An annotation: not status, not a label.
  await kube.core.patchNode({ name: 'status-1', body: { metadata: { annotations: { note: 'x' } } } }, mergePatch);
  await eventually('the annotation heard', () => every.heard.length === 4);
  await kube.core.patchNode({ name: 'status-1', body: { metadata: { labels: { a: '2' } } } }, mergePatch);
  await eventually('the label change heard by all', () => every.heard.length === 5 && labelsOnly.heard.length === 3);
  t.deepEqual(every.heard.slice(2), ['update status-1 1 <- 1', 'update status-1 1 <- 1', 'update status-1 2 <- 1']);
  t.deepEqual(specOnly.heard.slice(2), ['update status-1 1 <- 1', 'update status-1 2 <- 1'], 'the heartbeat is left out');
  t.deepEqual(labelsOnly.heard.slice(2), ['update status-1 2 <- 1'], 'only the label change');
});

test('a quiet watch is made again from where it was, without a new list', async (t) => {
  const informers = new Informers(config, { log: quiet, watchTimeoutMs: 500 });
  t.teardown(() => informers.stop());
  const core = config.makeApiClient(k8s.CoreV1Api);
  const source = nodesOf(core, 'quiet');
  const nodes = informers.informer(source);
  const { heard, handler } = recorder();
  nodes.addHandler(handler);
  informers.start();
  await nodes.whenSynced();
  // Several quiet ends of half a second each go by.
  await new Promise((resolve) => setTimeout(resolve, 2500));
  await createNode(kube, t, 'quiet-1', { test: 'quiet' });
  await eventually('the node heard', () => heard.includes('add quiet-1'));
  t.is(source.lists, 1, 'never listed again');
  t.deepEqual(heard, ['synced', 'add quiet-1'], 'no failure');
});

test('an informer whose API server is unreachable fails, starts again with backoff, and is synced again', async (t) => {
  const api = await startRelay(t, Number(new URL(kube.server.url).port));
  const relayed = new k8s.KubeConfig();
  relayed.loadFromFile(kubeconfigThrough(api, kube.server.admin.kubeconfig, kube.server.url, tempDir(t, 'kubeconfig')));
  const warnings: string[] = [];
  const informers = new Informers(relayed, {
    log: { info: () => undefined, warning: (message) => warnings.push(message) },
    retry: { initialMs: 100, maxMs: 400 },
  });
  t.teardown(() => informers.stop());
  const nodes = informers.informer(nodesOf(relayed.makeApiClient(k8s.CoreV1Api), 'failing'));
  const { heard, handler } = recorder();
  nodes.addHandler(handler);
  informers.start();
  await nodes.whenSynced();

  await api.close();
  await eventually('the failure heard', () => heard.includes('failed'));
  t.false(nodes.synced());
  await eventually('tried again more than once', () => warnings.length >= 3);
  t.regex(warnings[0] ?? '', /^watching nodes of failing failed \(.*\); trying again in 0\.1 s$/);
  await api.open();
  await eventually('synced again', () => nodes.synced());
  await createNode(kube, t, 'failing-1', { test: 'failing' });
  await eventually('a node created afterwards heard', () => heard.includes('add failing-1'));
  t.is(heard.filter((verb) => verb === 'synced').length, 2);
});
