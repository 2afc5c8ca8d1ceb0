// The policy controller (etcd datastore): each Kubernetes NetworkPolicy becomes the netplug
// NetworkPolicy `knp.default.<name>` in its namespace (ts/policy/kubernetes.ts converts it), which
// netplug-node reads from etcd. One reconcile per NetworkPolicy (`<namespace>/<name>`), from the
// NetworkPolicy cache; a policy gone from it (and from the API) takes its document with it. The
// key `*` sweeps the documents whose NetworkPolicy is gone (after every full list, and every
// resync): what was deleted while no controller ran. Status-only changes trigger nothing.
import type * as k8s from '@kubernetes/client-node';

import { keys } from '../model/keys.ts';
import { KUBERNETES_POLICY_PREFIX } from '../model/policy.ts';
import { convertKubernetesPolicy, servedKubernetesPolicy } from '../policy/kubernetes.ts';
import { Controller } from '../runtime/controller.ts';
import { exists } from '../runtime/errors.ts';
import type { Informer, Informers } from '../runtime/informers.ts';
import type { Log } from '../runtime/log.ts';
import type { RuntimeMetrics } from '../runtime/metrics.ts';
import type { Store } from '../store/store.ts';
import { ORPHANS_KEY, putDocument, removeDocument, removeOrphans, RESYNC_MS } from './mirror-documents.ts';
import { objectKey, splitKey } from './object-keys.ts';

export function networkPoliciesInformer(informers: Informers, networking: k8s.NetworkingV1Api): Informer<k8s.V1NetworkPolicy> {
  return informers.informer<k8s.V1NetworkPolicy>({
    what: 'networkpolicies.networking.k8s.io',
    path: '/apis/networking.k8s.io/v1/networkpolicies',
    list: () => networking.listNetworkPolicyForAllNamespaces(),
  });
}

export function policyController(options: {
  store: Store;
  policies: Informer<k8s.V1NetworkPolicy>;
  networking: k8s.NetworkingV1Api;
  log: Log;
  metrics: RuntimeMetrics;
}): Controller {
  const { store, policies, networking, log } = options;
  const documentKey = (namespace: string, name: string) => keys.networkPolicy(namespace, `${KUBERNETES_POLICY_PREFIX}${name}`);
  const apiHas = (namespace: string, name: string) => exists(() => networking.readNamespacedNetworkPolicy({ namespace, name }));
  /** The issues last reported per policy, so that a resync does not repeat them. */
  const reported = new Map<string, string>();

  const reconcile = async (key: string) => {
    if (key === ORPHANS_KEY) {
      if (!policies.synced()) return undefined;
      await removeOrphans({
        store,
        prefix: keys.networkPolicies,
        sourceOf: (documentKey) => {
          const { namespace, name } = splitKey(documentKey.slice(keys.networkPolicies.length));
          return namespace !== undefined && name.startsWith(KUBERNETES_POLICY_PREFIX)
            ? `${namespace}/${name.slice(KUBERNETES_POLICY_PREFIX.length)}`
            : undefined;
        },
        cached: (source) => policies.get(splitKey(source).name, splitKey(source).namespace) !== undefined,
        exists: (source) => apiHas(splitKey(source).namespace ?? '', splitKey(source).name),
        what: 'NetworkPolicy',
        log,
      });
      return undefined;
    }
    const { namespace = 'default', name } = splitKey(key);
    const object = policies.get(name, namespace);
    if (!object) {
      // Absent from a partial cache, or not yet there after a create: the document stays.
      if (!policies.synced() || (await apiHas(namespace, name))) return undefined;
      reported.delete(key);
      if (await removeDocument(store, documentKey(namespace, name)))
        log.info(`removed NetworkPolicy ${namespace}/${KUBERNETES_POLICY_PREFIX}${name}`);
      return undefined;
    }
    const { policy, issues } = convertKubernetesPolicy(servedKubernetesPolicy(object));
    const text = issues.map((issue) => `${issue.field}: ${issue.message}`).join('; ');
    if (text !== (reported.get(key) ?? '')) {
      if (text) log.warning(`NetworkPolicy ${key}: ${text}`);
      reported.set(key, text);
    }
    if (await putDocument(store, documentKey(namespace, name), policy))
      log.info(`wrote NetworkPolicy ${namespace}/${policy.metadata.name}`);
    return undefined;
  };

  const controller = new Controller({
    name: 'policy',
    log,
    metrics: options.metrics,
    resyncMs: RESYNC_MS,
    settleMs: 100,
    keys: () => [...policies.list().map(objectKey), ORPHANS_KEY],
    reconcile,
  });
  const trigger = (object: k8s.V1NetworkPolicy) => controller.trigger(objectKey(object));
  policies.addHandler(
    { add: trigger, update: trigger, delete: trigger, synced: () => controller.trigger(ORPHANS_KEY) },
    { ignoreStatusOnly: true },
  );
  return controller;
}
