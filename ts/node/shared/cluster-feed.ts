// What routes, the node's addresses and NAT are computed from (nodes, blocks, pools, and where
// each workload runs with its addresses and floating IPs), kept by the datastore's watch: each agent reads the datastore whole once, then receives changes,
// instead of reading it whole every few seconds (on a cluster of N nodes, N full reads every pass
// interval). Each subsystem that reads it is told of every change (`subscribe`) and acts only when
// what it depends on changed (feed-trigger.ts). The pools' usage on /metrics is counted from the
// same blocks and pools (ts/node/pool-usage/); an agent that programs no routes follows those two
// alone.
import { isBlockKey, keys } from '../../model/keys.ts';
import type { Entry, FollowEvents, Following } from '../../store/store.ts';
import { clusterStateOf, type ClusterState } from './read-cluster.ts';

/**
 * What an agent that programs routes follows: nodes, every block (IPv6 ones count for pool usage),
 * pools, workloads (on etcd their endpoints; on the Kubernetes datastore the pods, pods.ts).
 */
export const ROUTE_PREFIXES: readonly string[] = [keys.nodes, keys.allBlocks, keys.pools, keys.workloadEndpoints];
/** What an agent that programs no routes follows, for pool usage. */
export const USAGE_PREFIXES: readonly string[] = [keys.allBlocks, keys.pools];

export type Follow = (prefix: string, events: FollowEvents) => Following;

export interface ClusterFeed {
  /** The cluster as followed; undefined while any prefix is not (yet, or no longer) in step, or nodes are not followed: then read it. */
  current(): ClusterState | undefined;
  /** The entries under one followed prefix, in key order; undefined while it is not in step (or not followed). */
  entries(prefix: string): Entry<unknown>[] | undefined;
  /** Counts what the feed has heard (changes, lists, failures). */
  version(): number;
  /** Resolves once the feed has heard something after `version` (at once if it has). */
  next(version: number): Promise<void>;
  /** Calls `listener` after each change, list or failure the feed hears; returns what removes it. */
  subscribe(listener: () => void): () => void;
  stop(): void;
}

export function followCluster(follow: Follow, followed: readonly string[] = ROUTE_PREFIXES): ClusterFeed {
  const prefixes = followed.map(() => ({ inStep: false, entries: new Map<string, Entry<unknown>>() }));
  let version = 0;
  let wake = () => {};
  let heard = new Promise<void>((resolve) => (wake = resolve));
  const listeners = new Set<() => void>();
  const hear = () => {
    version++;
    const woken = wake;
    heard = new Promise<void>((resolve) => (wake = resolve));
    woken();
    for (const listener of listeners) listener();
  };
  const followings = followed.map((prefix, i) => {
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
  const entries = (prefix: string) => {
    const state = prefixes[followed.indexOf(prefix)];
    return state?.inStep ? sorted(state.entries) : undefined;
  };
  return {
    current: () => {
      const [nodes, blocks, pools] = [entries(keys.nodes), entries(keys.allBlocks), entries(keys.pools)];
      const workloads = followed.includes(keys.workloadEndpoints) ? entries(keys.workloadEndpoints) : [];
      if (!nodes || !blocks || !pools || !workloads) return undefined;
      return clusterStateOf(
        nodes,
        blocks.filter((block) => isBlockKey(block.key)),
        pools,
        workloads,
      );
    },
    entries,
    version: () => version,
    next: (after) => (version > after ? Promise.resolve() : heard),
    subscribe: (listener) => {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    stop: () => {
      for (const following of followings) following.stop();
    },
  };
}

/** What of the state routes depend on, as text: two states with the same digest program the same routes. */
export function digestOf(state: ClusterState): string {
  // Pools hold their prefixes as bigints, which JSON has no form for.
  return JSON.stringify(
    [state.nodes, state.blocks, state.pools, state.workloads, [...state.tunnelAddresses], state.broken],
    (_key, value: unknown) => (typeof value === 'bigint' ? value.toString() : value),
  );
}
