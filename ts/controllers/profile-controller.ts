// The profile controller (etcd datastore): each Namespace becomes the profile `kns.<namespace>` and
// each ServiceAccount the profile `ksa.<namespace>.<name>` (ts/policy/kubernetes.ts: their labels,
// prefixed, for the endpoints that name them; allow-all rules), which netplug-node reads from
// etcd. One reconcile per object (`namespace:<name>`, `serviceaccount:<namespace>/<name>`) from
// the caches; an object gone from its cache (and from the API) takes its profile with it. The key
// `*` sweeps the kns./ksa. profiles whose object is gone (after every full list, and every
// resync). Only label changes trigger.
// The key `default-allow` keeps the built-in profile projectnet-default-allow (policy/default-allow.ts)
// stored as it is: written at start, at every resync, and whenever etcd's watch of its document
// (while the controller runs) says it was changed or removed; the sweep never takes it (no object
// stands for it).
import type * as k8s from '@kubernetes/client-node';

import { DEFAULT_ALLOW_PROFILE } from '../model/host-endpoint.ts';
import { keys } from '../model/keys.ts';
import { namespaceProfileName, serviceAccountProfileName } from '../model/policy.ts';
import { defaultAllowProfile } from '../policy/default-allow.ts';
import { namespaceProfile, serviceAccountProfile } from '../policy/kubernetes.ts';
import { Controller, type ControllerOptions } from '../runtime/controller.ts';
import { exists } from '../runtime/errors.ts';
import type { Informer, Informers } from '../runtime/informers.ts';
import type { Log } from '../runtime/log.ts';
import type { RuntimeMetrics } from '../runtime/metrics.ts';
import type { Following, Store } from '../store/store.ts';
import type { Follow } from './auto-host-endpoints-controller.ts';
import { ORPHANS_KEY, putDocument, removeDocument, removeOrphans, RESYNC_MS } from './mirror-documents.ts';
import { objectKey, splitKey } from './object-keys.ts';

const NAMESPACE = 'namespace:';
const SERVICE_ACCOUNT = 'serviceaccount:';
/** The reconcile key of the built-in profile; no object's key has it. */
const DEFAULT_ALLOW_KEY = 'default-allow';
const DEFAULT_ALLOW_DOCUMENT = keys.profile(DEFAULT_ALLOW_PROFILE);
/** The profile names' prefixes (model/policy.ts's names of a namespace `x`, less the `x`). */
const KNS = namespaceProfileName('');
const KSA = serviceAccountProfileName('', '').slice(0, -1);

export function namespacesInformer(informers: Informers, core: k8s.CoreV1Api): Informer<k8s.V1Namespace> {
  return informers.informer<k8s.V1Namespace>({ what: 'namespaces', path: '/api/v1/namespaces', list: () => core.listNamespace() });
}

export function serviceAccountsInformer(informers: Informers, core: k8s.CoreV1Api): Informer<k8s.V1ServiceAccount> {
  return informers.informer<k8s.V1ServiceAccount>({
    what: 'service accounts',
    path: '/api/v1/serviceaccounts',
    list: () => core.listServiceAccountForAllNamespaces(),
  });
}

/** The object a kns./ksa. profile stands for, as a reconcile key; undefined for other profiles. */
function sourceOfProfile(name: string): string | undefined {
  if (name.startsWith(KNS)) return `${NAMESPACE}${name.slice(KNS.length)}`;
  if (!name.startsWith(KSA)) return undefined;
  // A namespace's name has no dot; a service account's may.
  const rest = name.slice(KSA.length);
  const dot = rest.indexOf('.');
  return dot > 0 ? `${SERVICE_ACCOUNT}${rest.slice(0, dot)}/${rest.slice(dot + 1)}` : undefined;
}

/** A controller that follows something of the datastore while it runs (and only then). */
class FollowingController extends Controller {
  private readonly start: (() => Following) | undefined;

  constructor(options: ControllerOptions, start: (() => Following) | undefined) {
    super(options);
    this.start = start;
  }

  override async run(signal: AbortSignal): Promise<void> {
    const following = this.start?.();
    try {
      await super.run(signal);
    } finally {
      following?.stop();
    }
  }
}

export function profileController(options: {
  store: Store;
  namespaces: Informer<k8s.V1Namespace>;
  serviceAccounts: Informer<k8s.V1ServiceAccount>;
  core: k8s.CoreV1Api;
  log: Log;
  metrics: RuntimeMetrics;
  /** The datastore's watch of a prefix (default: the store's own; without one, resyncs alone put the built-in profile back). */
  follow?: Follow;
}): Controller {
  const { store, namespaces, serviceAccounts, core, log } = options;
  const follow = options.follow ?? store.follow?.bind(store);
  /** The object of a key: its cache entry, whether that cache is complete, a fresh read, its profile. */
  const source = (key: string) => {
    if (key.startsWith(NAMESPACE)) {
      const name = key.slice(NAMESPACE.length);
      return {
        cached: namespaces.get(name),
        synced: namespaces.synced(),
        exists: () => exists(() => core.readNamespace({ name })),
        profile: (object: k8s.V1Namespace) => namespaceProfile({ metadata: { name, labels: object.metadata?.labels ?? {} } }),
        profileName: namespaceProfileName(name),
      };
    }
    const { namespace = 'default', name } = splitKey(key.slice(SERVICE_ACCOUNT.length));
    return {
      cached: serviceAccounts.get(name, namespace),
      synced: serviceAccounts.synced(),
      exists: () => exists(() => core.readNamespacedServiceAccount({ namespace, name })),
      profile: (object: k8s.V1ServiceAccount) =>
        serviceAccountProfile({ metadata: { name, namespace, labels: object.metadata?.labels ?? {} } }),
      profileName: serviceAccountProfileName(namespace, name),
    };
  };

  const reconcile = async (key: string) => {
    if (key === DEFAULT_ALLOW_KEY) {
      if (await putDocument(store, DEFAULT_ALLOW_DOCUMENT, defaultAllowProfile())) log.info(`wrote profile ${DEFAULT_ALLOW_PROFILE}`);
      return undefined;
    }
    if (key === ORPHANS_KEY) {
      if (!namespaces.synced() || !serviceAccounts.synced()) return undefined;
      await removeOrphans({
        store,
        prefix: keys.profiles,
        sourceOf: (profileKey) => sourceOfProfile(profileKey.slice(keys.profiles.length)),
        cached: (key) => source(key).cached !== undefined,
        exists: (key) => source(key).exists(),
        what: 'profile',
        log,
      });
      return undefined;
    }
    const of = source(key);
    const profileKey = keys.profile(of.profileName);
    if (!of.cached) {
      // Absent from a partial cache, or not yet there after a create: the profile stays.
      if (!of.synced || (await of.exists())) return undefined;
      if (await removeDocument(store, profileKey)) log.info(`removed profile ${of.profileName}`);
      return undefined;
    }
    if (await putDocument(store, profileKey, of.profile(of.cached as never))) log.info(`wrote profile ${of.profileName}`);
    return undefined;
  };

  const controller: Controller = new FollowingController(
    {
      name: 'profile',
      log,
      metrics: options.metrics,
      resyncMs: RESYNC_MS,
      settleMs: 100,
      keys: () => [
        DEFAULT_ALLOW_KEY,
        ...namespaces.list().map((object) => `${NAMESPACE}${objectKey(object)}`),
        ...serviceAccounts.list().map((object) => `${SERVICE_ACCOUNT}${objectKey(object)}`),
        ORPHANS_KEY,
      ],
      reconcile,
    },
    follow &&
      (() => {
        // The prefix is the document's key; longer keys under it are other profiles.
        const trigger = () => controller.trigger(DEFAULT_ALLOW_KEY);
        return follow(DEFAULT_ALLOW_DOCUMENT, {
          listed: trigger,
          changed: (entry) => {
            if (entry.key === DEFAULT_ALLOW_DOCUMENT) trigger();
          },
          removed: (key) => {
            if (key === DEFAULT_ALLOW_DOCUMENT) trigger();
          },
          // It lists again: that triggers.
          failed: () => undefined,
        });
      }),
  );
  const labels = { significant: (object: k8s.KubernetesObject) => object.metadata?.labels ?? {} };
  const handler = (prefix: string) => {
    const trigger = (object: k8s.KubernetesObject) => controller.trigger(`${prefix}${objectKey(object)}`);
    return { add: trigger, update: trigger, delete: trigger, synced: () => controller.trigger(ORPHANS_KEY) };
  };
  namespaces.addHandler(handler(NAMESPACE), labels);
  serviceAccounts.addHandler(handler(SERVICE_ACCOUNT), labels);
  return controller;
}
