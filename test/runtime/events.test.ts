// The event recorder (ts/runtime/events.ts) against a real kube-apiserver: an event lands on its
// object as `kubectl describe` finds it (by the object's kind, name, namespace and uid), repeats
// are counted on one event, also by a recorder made again (a restarted program), a cluster-wide
// object's events go to namespace default, and an identity without the right to write events
// costs a debug line, never a throw.
import * as k8s from '@kubernetes/client-node';
import test from 'ava';

import { EventRecorder, type InvolvedObject } from '../../ts/runtime/events.ts';
import { type Kube, startKube } from '../helpers/kube.ts';
import { sharedTeardowns } from '../helpers/shared.ts';

const shared = sharedTeardowns(test);
let kube: Kube;

test.before(async () => {
  kube = await startKube(shared);
});

/** A log keeping its debug lines. */
function debugLog() {
  const lines: string[] = [];
  return {
    lines,
    log: { error: () => undefined, warning: () => undefined, info: () => undefined, debug: (line: string) => lines.push(line) },
  };
}

const recorder = (config: k8s.KubeConfig, log = debugLog().log) =>
  new EventRecorder({ kube: config, component: 'netplug-node', host: 'ev1', log });

/** The events `kubectl describe` shows for the object: its namespace's (every one for a cluster-wide object), by kind, name and uid. */
async function eventsOf(object: InvolvedObject): Promise<k8s.CoreV1Event[]> {
  const fieldSelector = `involvedObject.kind=${object.kind},involvedObject.name=${object.name},involvedObject.uid=${object.uid}`;
  const list = object.namespace
    ? await kube.core.listNamespacedEvent({ namespace: object.namespace, fieldSelector })
    : await kube.core.listEventForAllNamespaces({ fieldSelector });
  return list.items;
}

test.serial('an event on a namespaced object; repeats, also by a recorder made again, are counted on the one event', async (t) => {
  const made = await kube.core.createNamespacedConfigMap({ namespace: 'default', body: { metadata: { name: 'ev-target' } } });
  shared.teardown(() => kube.core.deleteNamespacedConfigMap({ namespace: 'default', name: 'ev-target' }));
  const object = { apiVersion: 'v1', kind: 'ConfigMap', namespace: 'default', name: 'ev-target', uid: made.metadata?.uid as string };
  const { lines, log } = debugLog();
  const first = recorder(kube.config, log);
  first.record(object, 'Warning', 'PolicyNotProgrammed', 'field "spec.selector" is not a selector: selector "a = b"');
  first.record(object, 'Warning', 'PolicyNotProgrammed', 'field "spec.selector" is not a selector: selector "a = b"');
  first.record(object, 'Normal', 'Other', 'another message');
  await first.idle();
  t.deepEqual(lines, []);
  const events = await eventsOf(object);
  t.is(events.length, 2);
  const warning = events.find((event) => event.reason === 'PolicyNotProgrammed') as k8s.CoreV1Event;
  t.like(warning, {
    type: 'Warning',
    message: 'field "spec.selector" is not a selector: selector "a = b"',
    count: 2,
    source: { component: 'netplug-node', host: 'ev1' },
    reportingComponent: 'netplug-node',
    reportingInstance: 'ev1',
    involvedObject: { kind: 'ConfigMap', namespace: 'default', name: 'ev-target', uid: object.uid },
  });
  t.true((warning.lastTimestamp as Date) >= (warning.firstTimestamp as Date));

  const again = recorder(kube.config);
  again.record(object, 'Warning', 'PolicyNotProgrammed', 'field "spec.selector" is not a selector: selector "a = b"');
  await again.idle();
  const after = await eventsOf(object);
  t.is(after.length, 2, 'no second event of the same');
  t.is(after.find((event) => event.reason === 'PolicyNotProgrammed')?.count, 3);
});

test.serial("a cluster-wide object's events are in namespace default", async (t) => {
  const node = await kube.core.createNode({ body: { metadata: { name: 'ev-node' } } });
  shared.teardown(() => kube.core.deleteNode({ name: 'ev-node' }));
  const object = { apiVersion: 'v1', kind: 'Node', name: 'ev-node', uid: node.metadata?.uid as string };
  const events = recorder(kube.config);
  events.record(object, 'Warning', 'PolicyNotProgrammed', 'GlobalNetworkPolicy/x: not programmed');
  await events.idle();
  const found = await eventsOf(object);
  t.is(found.length, 1);
  t.is(found[0]?.metadata.namespace, 'default');
  t.is(found[0]?.involvedObject.namespace, undefined);
});

test.serial('without the right to write events the caller goes on: a debug line says why', async (t) => {
  const identity = await kube.identityWith('ev-no-events', [{ apiGroups: [''], resources: ['configmaps'], verbs: ['get'] }]);
  const config = new k8s.KubeConfig();
  config.loadFromFile(identity.kubeconfig);
  const { lines, log } = debugLog();
  const events = recorder(config, log);
  t.notThrows(() => events.record({ apiVersion: 'v1', kind: 'Node', name: 'ev-node' }, 'Warning', 'PolicyNotProgrammed', 'refused'));
  await events.idle();
  t.is(lines.length, 1);
  t.regex(lines[0] ?? '', /^event not written: PolicyNotProgrammed on Node ev-node: HTTP 403: .*cannot create resource "events"/);
});
