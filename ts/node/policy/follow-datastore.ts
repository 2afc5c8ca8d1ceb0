// What the policy subsystem follows on the etcd datastore, through the datastore's watch (as the
// cluster feed follows nodes, blocks and pools: listed whole once, then changes): every node's
// workload endpoints (this node's with their host interface), the profiles and the Kubernetes
// NetworkPolicies converted to `knp.default.*` policies that netplug-kube-controllers writes,
// netplug's own policies, network sets and tiers, and host endpoints. Each event marks its document's key dirty
// for the feed (feed-engine.ts); a following that broke keeps what it held until it lists again,
// so a datastore away for a while neither opens nor closes anything.
import { keys } from '../../model/keys.ts';
import { type WorkloadEndpoint, workloadEndpointName } from '../../model/workload-endpoint.ts';
import type { Entry, FollowEvents, Following } from '../../store/store.ts';
import type { Gate } from '../shared/subsystem.ts';
import type { FeedKind } from './convert-resources.ts';
import type { FeedSource } from './feed-engine.ts';

type Follow = (prefix: string, events: FollowEvents) => Following;

/** The kinds on etcd and their prefixes; keys under them are `<namespace>/<name>` or a name. */
const PREFIXES = {
  Tier: keys.tiers,
  Profile: keys.profiles,
  NetworkSet: keys.networkSets,
  GlobalNetworkSet: keys.globalNetworkSets,
  NetworkPolicy: keys.networkPolicies,
  GlobalNetworkPolicy: keys.globalNetworkPolicies,
  WorkloadEndpoint: keys.workloadEndpoints,
  HostEndpoint: keys.hostEndpoints,
} as const satisfies Partial<Record<FeedKind, string>>;
type DatastoreKind = keyof typeof PREFIXES;
const KINDS = Object.keys(PREFIXES) as DatastoreKind[];

export interface DatastoreEvents {
  /** A document changed or went. */
  changed(kind: FeedKind, key: string, value: unknown): void;
  /** Every document of `kind` was listed (first, and after a broken following). */
  listed(kind: FeedKind): void;
}

export interface FollowedDocuments {
  source: FeedSource;
  /** Resolve once each kind was listed whole: nothing is programmed from a partial view. */
  gates: Gate[];
  /** A document read outside the watch (an ADD's endpoint, just written): kept unless the watch has a newer one. */
  put(kind: DatastoreKind, key: string, entry: Entry<unknown>): boolean;
  stop(): void;
}

export function followPolicyDocuments(follow: Follow, events: DatastoreEvents): FollowedDocuments {
  const held = new Map<DatastoreKind, Map<string, Entry<unknown>>>(KINDS.map((kind) => [kind, new Map()]));
  const gates: Gate[] = [];
  const followings = KINDS.map((kind) => {
    const prefix = PREFIXES[kind];
    const entries = held.get(kind) as Map<string, Entry<unknown>>;
    let listed = false;
    const waiting: (() => void)[] = [];
    gates.push({ whenSynced: () => (listed ? Promise.resolve() : new Promise((resolve) => waiting.push(resolve))) });
    return follow(prefix, {
      listed(list) {
        entries.clear();
        for (const entry of list) entries.set(entry.key.slice(prefix.length), entry);
        listed = true;
        for (const resolve of waiting.splice(0)) resolve();
        events.listed(kind);
      },
      changed(entry) {
        const key = entry.key.slice(prefix.length);
        entries.set(key, entry);
        events.changed(kind, key, entry.value);
      },
      removed(removedKey) {
        const key = removedKey.slice(prefix.length);
        entries.delete(key);
        events.changed(kind, key, undefined);
      },
      // It lists again: that marks the kind whole.
      failed: () => undefined,
    });
  });
  return {
    source: {
      kinds: KINDS,
      keys: (kind) => held.get(kind as DatastoreKind)?.keys() ?? [],
      get: (kind, key) => held.get(kind as DatastoreKind)?.get(key)?.value,
    },
    gates,
    put(kind, key, entry) {
      const entries = held.get(kind) as Map<string, Entry<unknown>>;
      const current = entries.get(key);
      if (current && BigInt(current.revision) >= BigInt(entry.revision)) return false;
      entries.set(key, entry);
      return true;
    },
    stop() {
      for (const following of followings) following.stop();
    },
  };
}

/** The key (under the workload endpoints' prefix) of the endpoint an ADD on `node` wrote. */
export const addedEndpointKey = (node: string, namespace: string, pod: string, containerInterface: string): string =>
  `${namespace}/${workloadEndpointName(node, 'k8s', pod, containerInterface)}`;

/** Whether a workload endpoint document is of `node`. */
export const onNode = (value: unknown, node: string): boolean => (value as Partial<WorkloadEndpoint> | undefined)?.spec?.node === node;

/** The pod key (`<namespace>/<pod>`) of a workload endpoint document. */
export function podKeyOf(value: unknown): string | undefined {
  const endpoint = value as Partial<WorkloadEndpoint> | undefined;
  const pod = endpoint?.spec?.pod || endpoint?.spec?.workload;
  return endpoint?.metadata?.namespace && pod ? `${endpoint.metadata.namespace}/${pod}` : undefined;
}
