// Feeds the policy compiler (ts/policy/engine.ts) from the followed resources, level-triggered:
// an event only marks its object's key dirty; a pass reads each dirty key's object from the
// source (the informers' caches, follow-resources.ts; or on etcd the datastore's watch,
// follow-datastore.ts: workload endpoints and profiles instead of pods, namespaces and service
// accounts) as it is then and gives the engine what changed (an object the engine already holds
// unchanged is skipped, so remote pods' status churn costs a comparison). A pass over every key of
// a kind (first sync, a cache listed again after a failure) also removes what the cache lost.
//
// A local pod's addresses come from its status (podIPs) once the kubelet has written them; before
// that, from its ADD as the CNI service told it (program-networked-pod.ts), so that the pod is programmed before
// its containers start. Its host interface is the plugin's name for it (prefix + hash of
// `<namespace>.<pod>`), or the one the ADD answered with.
import type * as k8s from '@kubernetes/client-node';

import { hostInterfaceName } from '../../dataplane/index.ts';
import type { Logger } from '../../log/logger.ts';
import { checkedHostEndpoint, type HostEndpoint } from '../../model/host-endpoint.ts';
import { PolicyDocumentError } from '../../model/policy-check.ts';
import type { PolicyResource, ProfileResource } from '../../model/policy.ts';
import type { WorkloadEndpoint } from '../../model/workload-endpoint.ts';
import { defaultAllowProfile, isDefaultAllowProfile } from '../../policy/default-allow.ts';
import { endpointOfHostEndpoint, endpointOfPod, endpointOfWorkload, type EndpointInput, type KubePod } from '../../policy/endpoints.ts';
import type { PolicyEngine } from '../../policy/engine.ts';
import type { namespaceProfile } from '../../policy/kubernetes.ts';
import { convertedResource, digestOf, type FeedKind, removeResource, sameJson } from './convert-resources.ts';
import { cached, FOLLOWED_KINDS, type FollowedKind, objectKey, type PolicyInformers } from './follow-resources.ts';

/** What an ADD served on this node said of its pod (program-networked-pod.ts). */
export interface AddedPod {
  uid?: string;
  hostInterface?: string;
  /** The pod's side (CNI_IFNAME): the status file's name ends with it. */
  containerInterface: string;
  addresses: string[];
  mac?: string;
  /** The pod read from the API when the watch did not hold it yet. */
  pod?: KubePod;
}

/** A pod of this node whose endpoint (with its host interface) the engine holds. */
export interface LocalPod {
  key: string;
  namespace: string;
  name: string;
  containerInterface: string;
  addresses: readonly string[];
  mac?: string;
}

const FEED_KINDS: readonly FeedKind[] = [...FOLLOWED_KINDS, 'WorkloadEndpoint', 'Profile'];

/**
 * The order a pass gives the kinds in: what gives labels (profiles) before what carries them, so
 * that a first pass does not give every endpoint twice (once without its namespace's labels, then
 * again as each profile arrives); tiers before policies; policies last, each tested once against
 * the endpoints already there rather than each endpoint against every policy as it arrives.
 */
const PASS_ORDER: readonly FeedKind[] = [
  'Namespace',
  'ServiceAccount',
  'Profile',
  'Tier',
  'NetworkSet',
  'GlobalNetworkSet',
  'HostEndpoint',
  'Pod',
  'WorkloadEndpoint',
  'KubernetesNetworkPolicy',
  'NetworkPolicy',
  'GlobalNetworkPolicy',
];

/** Where a pass reads objects: each kind's keys (`<namespace>/<name>` or a name) and the object of a key. */
export interface FeedSource {
  readonly kinds: readonly FeedKind[];
  keys(kind: FeedKind): Iterable<string>;
  get(kind: FeedKind, key: string): unknown;
}

/** The shared informers' caches as a source. */
function informerSource(informers: PolicyInformers): FeedSource {
  return {
    kinds: FOLLOWED_KINDS,
    keys: (kind) => informers[kind as FollowedKind].list().map(objectKey),
    get: (kind, key) => cached(informers[kind as FollowedKind], key),
  };
}

export interface EngineFeedOptions {
  nodeName: string;
  interfacePrefix: string;
  log: Logger;
}

export class EngineFeed {
  readonly engine: PolicyEngine;
  readonly #source: FeedSource;
  readonly #options: EngineFeedOptions;
  readonly #dirty = new Map<FeedKind, Set<string>>(FEED_KINDS.map((kind) => [kind, new Set<string>()]));
  readonly #whole = new Set<FeedKind>();
  /**
   * Per kind, each key the engine holds and what it was given: an endpoint's input (the object
   * the engine keeps), or a digest of a resource's converted JSON (its text, kept for thousands
   * of policies, was megabytes).
   */
  readonly #fed = new Map<FeedKind, Map<string, unknown>>(FEED_KINDS.map((kind) => [kind, new Map<string, unknown>()]));
  /** Each workload endpoint document's endpoint key (`<namespace>/<pod>`) in the engine. */
  readonly #endpointKeys = new Map<string, string>();
  /** What of each resource could not be converted or checked (`<kind>/<key>` → messages). */
  readonly #issues = new Map<string, string[]>();
  readonly #added = new Map<string, AddedPod>();
  readonly #local = new Map<string, LocalPod>();
  readonly #passOrder: readonly FeedKind[];

  constructor(engine: PolicyEngine, source: FeedSource | PolicyInformers, options: EngineFeedOptions) {
    this.engine = engine;
    this.#source = 'kinds' in source ? (source as FeedSource) : informerSource(source as PolicyInformers);
    this.#options = options;
    const kinds = this.#source.kinds;
    this.#passOrder = [...PASS_ORDER.filter((kind) => kinds.includes(kind)), ...kinds.filter((kind) => !PASS_ORDER.includes(kind))];
    // Built in: what automatic host endpoints name exists whatever the datastore holds.
    engine.upsertProfile(defaultAllowProfile());
  }

  mark(kind: FeedKind, key: string): void {
    this.#dirty.get(kind)?.add(key);
  }

  /** Every key of `kind` (or of every kind) is looked at by the next pass. */
  markWhole(kind?: FeedKind): void {
    for (const each of kind ? [kind] : this.#source.kinds) this.#whole.add(each);
  }

  pending(): boolean {
    return this.#whole.size > 0 || [...this.#dirty.values()].some((keys) => keys.size > 0);
  }

  /** An ADD served here: its pod is programmed with these addresses until its status has its own. */
  learn(key: string, added: AddedPod): void {
    this.#added.set(key, added);
    this.mark('Pod', key);
  }

  /** A pod was deleted: what its ADD said goes too, unless a newer pod of that name was added since. */
  forget(key: string, uid: string | undefined): void {
    const added = this.#added.get(key);
    if (added && (added.uid === undefined || uid === undefined || added.uid === uid)) this.#added.delete(key);
  }

  /** The pods of this node the engine holds with their interface. */
  localPods(): ReadonlyMap<string, LocalPod> {
    return this.#local;
  }

  /** What could not be converted or checked, per resource. */
  resourceIssues(): ReadonlyMap<string, string[]> {
    return this.#issues;
  }

  /** Gives the engine what changed; returns how many keys were looked at. */
  pass(): number {
    let looked = 0;
    for (const kind of this.#passOrder) {
      const keys = this.#dirty.get(kind) as Set<string>;
      if (this.#whole.delete(kind)) {
        for (const key of this.#source.keys(kind)) keys.add(key);
        for (const key of (this.#fed.get(kind) as Map<string, unknown>).keys()) keys.add(key);
        if (kind === 'Pod') for (const key of this.#added.keys()) keys.add(key);
      }
      for (const key of keys) {
        looked++;
        this.#feed(kind, key);
      }
      keys.clear();
    }
    return looked;
  }

  #feed(kind: FeedKind, key: string): void {
    const object = this.#source.get(kind, key) as k8s.KubernetesObject | undefined;
    if (kind === 'Pod') {
      this.#feedPod(key, object as KubePod | undefined);
      return;
    }
    if (kind === 'WorkloadEndpoint') {
      this.#feedWorkloadEndpoint(key, object as WorkloadEndpoint | undefined);
      return;
    }
    if (kind === 'HostEndpoint') {
      this.#feedHostEndpoint(key, object);
      return;
    }
    const name = key.slice(key.indexOf('/') + 1);
    // The datastore's copy (etcd keeps one for netplugctl) never replaces or removes the built-in one.
    if (kind === 'Profile' && isDefaultAllowProfile(name)) return;
    const namespace = key.includes('/') ? key.slice(0, key.indexOf('/')) : undefined;
    if (!object) {
      if (this.#forget(kind, key)) removeResource(this.engine, kind, name, namespace);
      this.#issues.delete(`${kind}/${key}`);
      return;
    }
    let given: PolicyResource | { profile: ReturnType<typeof namespaceProfile> };
    const issues: string[] = [];
    try {
      given = convertedResource(kind, object, issues, this.#source.kinds.includes('KubernetesNetworkPolicy'));
    } catch (err) {
      if (!(err instanceof PolicyDocumentError)) throw err;
      // The version the engine holds (if any) stays: a bad update neither opens nor closes anything.
      this.#issues.set(`${kind}/${key}`, [err.message]);
      return;
    }
    const digest = digestOf(given);
    const fed = this.#fed.get(kind) as Map<string, unknown>;
    if (fed.get(key) !== digest) {
      fed.set(key, digest);
      if ('profile' in given) this.engine.upsertProfile(given.profile);
      else if (given.kind === 'Profile') this.engine.upsertProfile(given as ProfileResource);
      else if (given.kind === 'NetworkPolicy' || given.kind === 'GlobalNetworkPolicy') this.engine.upsertPolicy(given);
      else if (given.kind === 'NetworkSet' || given.kind === 'GlobalNetworkSet') this.engine.upsertNetworkSet(given);
      else if (given.kind === 'Tier') this.engine.upsertTier(given);
    }
    if (issues.length > 0) this.#issues.set(`${kind}/${key}`, issues);
    else this.#issues.delete(`${kind}/${key}`);
  }

  /** A host endpoint (this node's are programmed); a document that fails its check leaves the one held. */
  #feedHostEndpoint(key: string, object: unknown): void {
    const fed = this.#fed.get('HostEndpoint') as Map<string, unknown>;
    if (!object) {
      if (fed.delete(key)) this.engine.removeHostEndpoint(key);
      this.#issues.delete(`HostEndpoint/${key}`);
      return;
    }
    let document: HostEndpoint;
    try {
      document = checkedHostEndpoint({ key, value: object, revision: '0' }).value;
    } catch (err) {
      this.#issues.set(`HostEndpoint/${key}`, [(err as Error).message]);
      return;
    }
    this.#issues.delete(`HostEndpoint/${key}`);
    const endpoint = endpointOfHostEndpoint(document);
    if (sameJson(fed.get(key), endpoint)) return;
    fed.set(key, endpoint);
    this.engine.upsertHostEndpoint(endpoint);
  }

  /** Whether the engine held `key` of `kind` (it does no more). */
  #forget(kind: FeedKind, key: string): boolean {
    return (this.#fed.get(kind) as Map<string, unknown>).delete(key);
  }

  /**
   * A workload endpoint document (etcd): every node's are endpoints (peers of selectors); this
   * node's carry the host interface the plugin wrote, and are the local pods the status files are for.
   */
  #feedWorkloadEndpoint(key: string, document: WorkloadEndpoint | undefined): void {
    const fed = this.#fed.get('WorkloadEndpoint') as Map<string, unknown>;
    const before = this.#endpointKeys.get(key);
    const endpoint = document?.spec && document.metadata ? endpointOfWorkload(document) : undefined;
    const local = endpoint?.node === this.#options.nodeName;
    if (endpoint && !local) delete endpoint.interfaceName;
    if (before !== undefined && before !== endpoint?.key) {
      this.engine.removeEndpoint(before);
      this.#local.delete(before);
      this.#endpointKeys.delete(key);
      fed.delete(key);
      // Another document of the same pod (made on another node before this one went) is given again.
      for (const [other, endpointKey] of this.#endpointKeys)
        if (endpointKey === before) {
          fed.delete(other);
          this.#feedWorkloadEndpoint(other, this.#source.get('WorkloadEndpoint', other) as WorkloadEndpoint | undefined);
        }
    }
    if (!endpoint || !document) {
      this.#issues.delete(`WorkloadEndpoint/${key}`);
      return;
    }
    this.#endpointKeys.set(key, endpoint.key);
    if (!sameJson(fed.get(key), endpoint)) {
      fed.set(key, endpoint);
      this.engine.upsertEndpoint(endpoint);
    }
    if (local)
      this.#local.set(endpoint.key, {
        key: endpoint.key,
        namespace: endpoint.namespace,
        name: endpoint.name,
        containerInterface: document.spec.endpoint || 'eth0',
        addresses: endpoint.addresses,
        ...(document.spec.mac ? { mac: document.spec.mac } : {}),
      });
    else this.#local.delete(endpoint.key);
  }

  #feedPod(key: string, watched: KubePod | undefined): void {
    const added = this.#added.get(key);
    const uid = (pod: KubePod | undefined) => (pod?.metadata as { uid?: string } | undefined)?.uid;
    // The pod as its ADD read it serves until the watch holds it.
    const pod = watched ?? added?.pod;
    if (watched && added?.pod && uid(watched) === uid(added.pod)) delete added.pod;
    const phase = (pod as { status?: { phase?: string } } | undefined)?.status?.phase;
    const finished = phase === 'Succeeded' || phase === 'Failed';
    const local = pod?.spec?.nodeName === this.#options.nodeName;
    const namespace = pod?.metadata.namespace ?? 'default';
    const name = pod?.metadata.name ?? '';
    // An ADD's addresses belong to the pod it was made for (a pod of the same name made since is another).
    const fromAdd = added && (added.uid === undefined || uid(pod) === undefined || added.uid === uid(pod)) ? added : undefined;
    const hostInterface = local
      ? (fromAdd?.hostInterface ?? hostInterfaceName(this.#options.interfacePrefix, `${namespace}.${name}`))
      : undefined;
    const endpoint: EndpointInput | undefined = pod && !finished ? endpointOfPod(pod, hostInterface) : undefined;
    if (endpoint && local && endpoint.addresses.length === 0 && fromAdd) endpoint.addresses = fromAdd.addresses;
    const fed = this.#fed.get('Pod') as Map<string, unknown>;
    if (!endpoint) {
      if (fed.delete(key)) this.engine.removeEndpoint(key);
      this.#local.delete(key);
      return;
    }
    if (!sameJson(fed.get(key), endpoint)) {
      fed.set(key, endpoint);
      this.engine.upsertEndpoint(endpoint);
    }
    if (local)
      this.#local.set(key, {
        key,
        namespace,
        name,
        containerInterface: fromAdd?.containerInterface ?? 'eth0',
        addresses: endpoint.addresses,
        ...(fromAdd?.mac ? { mac: fromAdd.mac } : {}),
      });
    else this.#local.delete(key);
  }
}
