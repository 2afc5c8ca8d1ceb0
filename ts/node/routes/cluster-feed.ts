// What routes are computed from (nodes, IPv4 blocks, pools), kept by the datastore's watch: each
// agent reads the datastore whole once, then receives changes, instead of reading it whole every
// few seconds (on a cluster of N nodes, N full reads every pass interval). A pass then runs when a
// change alters what routes depend on, and on a slower timer that repairs the kernel.
import type { Entry, FollowEvents, Following } from '../../store/store.ts';
import { CLUSTER_PREFIXES, clusterStateOf, type ClusterState } from './read-cluster.ts';

export type Follow = (prefix: string, events: FollowEvents) => Following;

export interface ClusterFeed {
  /** The cluster as followed; undefined while any prefix is not (yet, or no longer) in step: then read it. */
  current(): ClusterState | undefined;
  /** Counts what the feed has heard (changes, lists, failures). */
  version(): number;
  /** Resolves once the feed has heard something after `version` (at once if it has). */
  next(version: number): Promise<void>;
  stop(): void;
}

export function followCluster(follow: Follow): ClusterFeed {
  const prefixes = CLUSTER_PREFIXES.map(() => ({ inStep: false, entries: new Map<string, Entry<unknown>>() }));
  let version = 0;
  let wake = () => {};
  let heard = new Promise<void>((resolve) => (wake = resolve));
  const hear = () => {
    version++;
    const woken = wake;
    heard = new Promise<void>((resolve) => (wake = resolve));
    woken();
  };
  const followings = CLUSTER_PREFIXES.map((prefix, i) => {
    const state = prefixes[i] as (typeof prefixes)[number];
    return follow(prefix, {
      listed(entries) {
        state.entries = new Map(entries.map((entry) => [entry.key, entry]));
        state.inStep = true;
        hear();
      },
      changed(entry) {
        state.entries.set(entry.key, entry);
        hear();
      },
      removed(key) {
        state.entries.delete(key);
        hear();
      },
      failed() {
        state.inStep = false;
        hear();
      },
    });
  });
  const sorted = (entries: Map<string, Entry<unknown>>) =>
    [...entries.values()].sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  return {
    current: () => {
      if (!prefixes.every((p) => p.inStep)) return undefined;
      const [nodes, blocks, pools] = prefixes.map((p) => sorted(p.entries)) as [Entry<unknown>[], Entry<unknown>[], Entry<unknown>[]];
      return clusterStateOf(nodes, blocks, pools);
    },
    version: () => version,
    next: (after) => (version > after ? Promise.resolve() : heard),
    stop: () => {
      for (const following of followings) following.stop();
    },
  };
}

/** What of the state routes depend on, as text: two states with the same digest program the same routes. */
export function digestOf(state: ClusterState): string {
  // Pools hold their prefixes as bigints, which JSON has no form for.
  return JSON.stringify([state.nodes, state.blocks, state.pools, [...state.tunnelAddresses], state.broken], (_key, value: unknown) =>
    typeof value === 'bigint' ? value.toString() : value,
  );
}
