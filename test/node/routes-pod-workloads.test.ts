// On the Kubernetes datastore the cluster feed follows the pods as its workloads
// (ts/node/shared/pods.ts; pure: the pod informer is an in-memory stand-in): the workload
// endpoints' prefix is served from the pods, one entry per pod, listed once synced, changed,
// removed; other prefixes go to the datastore's own follow; only a change of where a pod runs or
// what reaches it wakes the feed, not its labels.
import test from 'ava';
import type * as k8s from '@kubernetes/client-node';

import { keys } from '../../ts/model/keys.ts';
import { ANNOTATIONS } from '../../ts/model/pod-annotations.ts';
import type { Handler, Informer } from '../../ts/runtime/informers.ts';
import { withPodsAsWorkloads } from '../../ts/node/shared/pods.ts';
import type { Entry, FollowEvents } from '../../ts/store/store.ts';

function podInformer(pods: k8s.KubernetesObject[]) {
  let handler: Handler<k8s.KubernetesObject> | undefined;
  let significant: ((object: k8s.KubernetesObject) => unknown) | undefined;
  let made = 0;
  const informer = {
    what: 'pods',
    list: () => pods,
    addHandler: (given: Handler<k8s.KubernetesObject>, options?: { significant?: (object: k8s.KubernetesObject) => unknown }) => {
      handler = given;
      significant = options?.significant;
      return () => {
        handler = undefined;
      };
    },
  } as unknown as Informer<k8s.KubernetesObject>;
  return {
    make: () => {
      made++;
      return informer;
    },
    made: () => made,
    handler: () => handler,
    significant: () => significant as (object: k8s.KubernetesObject) => unknown,
  };
}

const pod = (name: string, labels: Record<string, string> = {}, annotations: Record<string, string> = {}): k8s.V1Pod => ({
  kind: 'Pod',
  metadata: { name, namespace: 'default', resourceVersion: '7', labels, annotations },
  spec: { nodeName: 'n2', containers: [] },
  status: { phase: 'Running', podIPs: [{ ip: '10.244.7.7' }] },
});

function recorder() {
  const heard: string[] = [];
  const events: FollowEvents = {
    listed: (entries: Entry<unknown>[]) => heard.push(`listed ${entries.map((e) => e.key).join(',')}`),
    changed: (entry) => heard.push(`changed ${entry.key}`),
    removed: (key) => heard.push(`removed ${key}`),
    failed: (err) => heard.push(`failed ${err.message}`),
  };
  return { heard, events };
}

test('the workload endpoints are followed as the pods; other prefixes as the datastore follows them; no pod informer until asked', (t) => {
  const pods = podInformer([pod('a')]);
  const others: string[] = [];
  const follow = withPodsAsWorkloads((prefix) => {
    others.push(prefix);
    return { stop: () => undefined };
  }, pods.make);
  follow(keys.pools, recorder().events);
  t.deepEqual(others, [keys.pools]);
  t.is(pods.made(), 0, 'an agent that follows no workloads watches no pods for it');

  const { heard, events } = recorder();
  const following = follow(keys.workloadEndpoints, events);
  const key = `${keys.workloadEndpoints}default/a`;
  pods.handler()?.synced?.();
  pods.handler()?.update?.(pod('a'), pod('a'));
  pods.handler()?.delete?.(pod('a'));
  pods.handler()?.failed?.(new Error('watch broke'));
  t.deepEqual(heard, [`listed ${key}`, `changed ${key}`, `removed ${key}`, 'failed watch broke']);
  following.stop();
  t.is(pods.handler(), undefined);
});

test('only where a pod runs and what reaches it wake the feed: not its labels', (t) => {
  const pods = podInformer([]);
  withPodsAsWorkloads(() => ({ stop: () => undefined }), pods.make)(keys.workloadEndpoints, recorder().events);
  const same = (a: k8s.KubernetesObject, b: k8s.KubernetesObject) =>
    JSON.stringify(pods.significant()(a)) === JSON.stringify(pods.significant()(b));
  t.true(same(pod('a'), pod('a', { app: 'web' })));
  t.false(same(pod('a'), pod('a', {}, { [ANNOTATIONS.floatingIPs]: '["10.250.0.1"]' })));
  const moved = { ...pod('a'), status: { phase: 'Running', podIPs: [{ ip: '10.244.7.8' }] } };
  t.false(same(pod('a'), moved));
});
