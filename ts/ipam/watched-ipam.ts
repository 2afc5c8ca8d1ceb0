// The blocks and pools as a resident agent's datastore watch shows them (the one it keeps for routes
// and pool usage), indexed by the node each block is affine to: what KnownNodes decides an ADD on
// when its own reads are old. Only a view: a commit decided on it states each block's revision and
// each pool as a condition, so a change the watch has not shown yet fails that commit, which is
// then decided again on a fresh read.
import type { Entry, FollowEvents, Following } from '../store/store.ts';
import { cidrOfKey, keys } from '../model/keys.ts';
import type { Block } from '../model/ipam-documents.ts';
import type { PoolResource } from '../model/ip-pool.ts';
import { checkedBlock } from '../model/checked-documents.ts';

/** A datastore's follow(), as the agent's watches use it. */
export type Follow = (prefix: string, events: FollowEvents) => Following;

const HOST = 'host:';

export class WatchedIpam {
  private readonly blocks = { inStep: false, nodeOf: new Map<string, string>(), byNode: new Map<string, Map<string, Entry<Block>>>() };
  private readonly poolEntries = { inStep: false, entries: new Map<string, Entry<PoolResource>>() };

  /** Whether both blocks and pools are followed and in step with the datastore. */
  inStep(): boolean {
    return this.blocks.inStep && this.poolEntries.inStep;
  }

  /** The blocks affine to `node`, by CIDR (the watch's entries: callers copy before changing them). */
  nodeBlocks(node: string): ReadonlyMap<string, Entry<Block>> {
    return this.blocks.byNode.get(node) ?? new Map();
  }

  /** Every pool, in key order (as a list of the datastore gives them). */
  pools(): Entry<PoolResource>[] {
    return [...this.poolEntries.entries.values()].sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  }

  /**
   * `follow` with the blocks' and pools' events also told to this view: the agent follows each
   * prefix once, for routes, pool usage and this.
   */
  teed(follow: Follow): Follow {
    return (prefix, events) => {
      const mine = prefix === keys.allBlocks ? this.blockEvents() : prefix === keys.pools ? this.poolEvents() : undefined;
      if (!mine) return follow(prefix, events);
      return follow(prefix, {
        listed: (entries) => {
          mine.listed(entries);
          events.listed(entries);
        },
        changed: (entry) => {
          mine.changed(entry);
          events.changed(entry);
        },
        removed: (key) => {
          mine.removed(key);
          events.removed(key);
        },
        failed: (err) => {
          mine.failed(err);
          events.failed(err);
        },
      });
    };
  }

  private blockEvents(): FollowEvents {
    const { blocks } = this;
    const remove = (key: string) => {
      const node = blocks.nodeOf.get(key);
      if (node === undefined) return;
      blocks.nodeOf.delete(key);
      const ofNode = blocks.byNode.get(node);
      ofNode?.delete(cidrOfKey(key));
      if (ofNode?.size === 0) blocks.byNode.delete(node);
    };
    const set = (entry: Entry<unknown>) => {
      remove(entry.key);
      let block: Entry<Block>;
      try {
        block = checkedBlock(entry);
      } catch {
        return; // a broken block: whoever reads it reports it
      }
      const affinity = block.value.affinity;
      if (!affinity?.startsWith(HOST)) return;
      const node = affinity.slice(HOST.length);
      blocks.nodeOf.set(entry.key, node);
      const ofNode = blocks.byNode.get(node) ?? new Map<string, Entry<Block>>();
      blocks.byNode.set(node, ofNode);
      ofNode.set(cidrOfKey(entry.key), block);
    };
    return {
      listed: (entries) => {
        blocks.nodeOf.clear();
        blocks.byNode.clear();
        for (const entry of entries) set(entry);
        blocks.inStep = true;
      },
      changed: set,
      removed: remove,
      failed: () => {
        blocks.inStep = false;
      },
    };
  }

  private poolEvents(): FollowEvents {
    const pools = this.poolEntries;
    return {
      listed: (entries) => {
        pools.entries = new Map(entries.map((entry) => [entry.key, entry as Entry<PoolResource>]));
        pools.inStep = true;
      },
      changed: (entry) => {
        pools.entries.set(entry.key, entry as Entry<PoolResource>);
      },
      removed: (key) => {
        pools.entries.delete(key);
      },
      failed: () => {
        pools.inStep = false;
      },
    };
  }
}
