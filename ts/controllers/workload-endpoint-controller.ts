// The workloadendpoint controller (etcd datastore): each pod's workload endpoints carry its labels
// and its service account (label, spec and profiles), as the plugin wrote them at ADD, kept so
// when the pod's labels change later; netplug-node's selectors match them. One reconcile per pod
// (`<namespace>/<name>`), from the pod cache and the endpoints the datastore's watch holds (an
// endpoint written by an ADD triggers its pod too: labels changed between the ADD's read and its
// write are put right). Endpoints come and go with the plugin's ADD and DEL and the ipam
// controller: this controller changes their labels only. Only label and service account
// changes of a pod trigger.
import type * as k8s from '@kubernetes/client-node';

import { keys } from '../model/keys.ts';
import { ENDPOINT_LABELS, namespaceProfileName, serviceAccountProfileName } from '../model/policy.ts';
import type { WorkloadEndpoint } from '../model/workload-endpoint.ts';
import { Controller } from '../runtime/controller.ts';
import type { Informer } from '../runtime/informers.ts';
import type { Log } from '../runtime/log.ts';
import { sameContent } from '../runtime/object-changes.ts';
import type { RuntimeMetrics } from '../runtime/metrics.ts';
import type { Entry, Store } from '../store/store.ts';
import type { Follow } from './auto-host-endpoints-controller.ts';
import { RESYNC_MS } from './mirror-documents.ts';
import { objectKey, splitKey } from './object-keys.ts';

/** netplug's own labels on an endpoint, which a pod's labels do not replace. */
const NETWORK_LABEL = 'projectnet.org/network';
const DEFAULT_SERVICE_ACCOUNT = 'default';
/**
 * Queued when the endpoints are listed, and reconciled as done: the controller's first pass, also
 * with no endpoint to keep (a new cluster whose only pods are in the host's network); no pod's key.
 */
const LISTED_KEY = '*';

/** The pod an endpoint belongs to, as a reconcile key; undefined for endpoints of no pod. */
function podOf(endpoint: unknown): string | undefined {
  const { metadata, spec } = (endpoint ?? {}) as Partial<WorkloadEndpoint>;
  return spec?.orchestrator === 'k8s' && spec.pod && metadata?.namespace ? `${metadata.namespace}/${spec.pod}` : undefined;
}

/** The endpoint as it should be for `pod`. */
function wanted(endpoint: WorkloadEndpoint, pod: k8s.V1Pod): WorkloadEndpoint {
  const { namespace } = endpoint.metadata;
  const serviceAccount = pod.spec?.serviceAccountName || DEFAULT_SERVICE_ACCOUNT;
  const current = endpoint.metadata.labels ?? {};
  const labels: Record<string, string> = { ...(pod.metadata?.labels ?? {}) };
  if (current[NETWORK_LABEL] !== undefined) labels[NETWORK_LABEL] = current[NETWORK_LABEL];
  labels[ENDPOINT_LABELS.namespace] = namespace;
  labels[ENDPOINT_LABELS.orchestrator] = endpoint.spec.orchestrator;
  labels[ENDPOINT_LABELS.serviceAccount] = serviceAccount;
  return {
    ...endpoint,
    metadata: { ...endpoint.metadata, labels },
    spec: {
      ...endpoint.spec,
      serviceAccountName: serviceAccount,
      profiles: [namespaceProfileName(namespace), serviceAccountProfileName(namespace, serviceAccount)],
    },
  };
}

export function workloadEndpointController(options: {
  store: Store;
  pods: Informer<k8s.V1Pod>;
  /** The datastore's watch of a prefix. */
  follow: Follow;
  log: Log;
  metrics: RuntimeMetrics;
}): { controller: Controller; stop(): void } {
  const { store, pods, log } = options;
  /** Each endpoint's pod, and each pod's endpoints, as the watch holds them. */
  const podOfEndpoint = new Map<string, string>();
  const endpointsOfPod = new Map<string, Set<string>>();
  const forget = (key: string) => {
    const pod = podOfEndpoint.get(key);
    if (pod === undefined) return;
    podOfEndpoint.delete(key);
    const set = endpointsOfPod.get(pod);
    set?.delete(key);
    if (set?.size === 0) endpointsOfPod.delete(pod);
  };
  const remember = (entry: Entry<unknown>): string | undefined => {
    forget(entry.key);
    const pod = podOf(entry.value);
    if (pod === undefined) return undefined;
    podOfEndpoint.set(entry.key, pod);
    const set = endpointsOfPod.get(pod) ?? new Set<string>();
    set.add(entry.key);
    endpointsOfPod.set(pod, set);
    return pod;
  };

  const reconcile = async (podKey: string) => {
    if (podKey === LISTED_KEY) return undefined;
    const { namespace = 'default', name } = splitKey(podKey);
    const pod = pods.get(name, namespace);
    // A pod gone takes its endpoints with its DEL (or the ipam controller): nothing to do here.
    if (!pod) return undefined;
    let conflicts = 0;
    for (const key of [...(endpointsOfPod.get(podKey) ?? [])]) {
      const entry = await store.get<WorkloadEndpoint>(key);
      if (!entry || podOf(entry.value) !== podKey) continue;
      const value = wanted(entry.value, pod);
      if (sameContent(value, entry.value)) continue;
      if (await store.commit([{ key, update: value, revision: entry.revision }]))
        log.info(`set the labels of workload endpoint ${key.slice(keys.workloadEndpoints.length)} to pod ${podKey}'s`);
      else conflicts++;
    }
    if (conflicts > 0) throw new Error(`${conflicts} workload endpoint(s) of pod ${podKey} changed while their labels were set`);
    return undefined;
  };

  const controller = new Controller({
    name: 'workloadendpoint',
    log,
    metrics: options.metrics,
    resyncMs: RESYNC_MS,
    settleMs: 100,
    keys: () => endpointsOfPod.keys(),
    reconcile,
  });
  const trigger = (object: k8s.V1Pod) => {
    const key = objectKey(object);
    if (endpointsOfPod.has(key)) controller.trigger(key);
  };
  pods.addHandler(
    {
      add: trigger,
      update: trigger,
      synced: () => {
        for (const key of endpointsOfPod.keys()) controller.trigger(key);
      },
    },
    { significant: (pod) => [pod.metadata?.labels ?? {}, pod.spec?.serviceAccountName] },
  );
  const following = options.follow(keys.workloadEndpoints, {
    listed(entries) {
      podOfEndpoint.clear();
      endpointsOfPod.clear();
      for (const entry of entries) remember(entry);
      for (const key of endpointsOfPod.keys()) controller.trigger(key);
      controller.trigger(LISTED_KEY);
    },
    changed(entry) {
      const pod = remember(entry);
      if (pod !== undefined) controller.trigger(pod);
    },
    removed: forget,
    // It lists again: that triggers.
    failed: () => undefined,
  });
  return { controller, stop: () => following.stop() };
}
