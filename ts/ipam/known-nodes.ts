// What a resident agent knows of its nodes' address state between commands: the pools, the node,
// ClusterInformation, the node's affinities and blocks, as last read or written, and the handles
// and workload endpoints its own commits wrote. An ADD with fresh knowledge skips its first reads and commits at once,
// every fact it was decided on stated as a condition of the commit (revisions; pools and node
// unchanged): a stale fact fails the commit, the knowledge is dropped, and the ADD reads afresh. A
// DEL of a handle or endpoint it wrote skips its read the same way. Nothing is trusted that a commit does not
// check, so the datastore stays the one truth; the knowledge only spares round trips. Where the
// agent's watch is in step (watched-ipam.ts) and every fact is a condition of the commit (etcd),
// what was read does not age: the blocks and pools come from the watch as well, newest first.
import type { Family } from '../net/cidr.ts';
import type { Entry, Write } from '../store/store.ts';
import { cidrOfKey, familyOf, isBlockKey, keys } from '../model/keys.ts';
import type { Block, Handle } from '../model/ipam-documents.ts';
import { plainCopy } from '../model/plain-copy.ts';
import type { NodeResource } from '../model/node.ts';
import type { PoolResource } from '../model/ip-pool.ts';
import type { WatchedIpam } from './watched-ipam.ts';

/** An ADD's facts beyond its own attachment's, as ReadAhead lays them out. */
export interface NodeFacts {
  pools: Entry<PoolResource>[];
  node: Entry<NodeResource> | undefined;
  clusterInfo: Entry<unknown> | undefined;
  affinityKeys: Partial<Record<Family, string[]>>;
  blocks: Record<string, Entry<Block> | null>;
}

/**
 * How long facts are used without a read: a pool created meanwhile is seen by the next read
 * (existing pools, the node and ClusterInformation are checked by every commit, whatever their age).
 */
const FACTS_FRESH_MS = 5_000;
/** Documents remembered at most (a node runs far fewer pods); the oldest go first. */
const DOCUMENTS_KEPT = 4_000;

export class KnownNodes {
  private readonly facts = new Map<string, { at: number; facts: NodeFacts }>();
  private readonly documents = new Map<string, Entry<unknown>>();
  /**
   * Per node: this agent's commits on its blocks so far (facts read before the count moved may be
   * stale), and the count at which each block was last written and an affinity last changed.
   */
  private readonly commitsOn = new Map<string, { count: number; blocks: Map<string, number>; affinities: number }>();
  /** Per node: a read of its facts in flight, which ADDs arriving meanwhile wait for instead of reading too. */
  private readonly reading = new Map<string, Promise<unknown>>();
  private readonly now: () => number;
  private readonly watched: WatchedIpam | undefined;

  /**
   * `watched`: the agent's watch of blocks and pools, on a datastore whose commits check every
   * fact (etcd: there the node too is a condition, and revisions are ordered).
   */
  constructor(now: () => number = Date.now, watched?: WatchedIpam) {
    this.now = now;
    this.watched = watched;
  }

  /**
   * The node's facts if read recently enough to decide an ADD on, or kept current by the watch.
   * Blocks are copies: a command plans on them in place, and a plan whose commit fails must leave
   * nothing here.
   */
  fresh(node: string): NodeFacts | undefined {
    const known = this.facts.get(node);
    if (!known) return undefined;
    if (this.now() - known.at <= FACTS_FRESH_MS) return { ...known.facts, blocks: copies(known.facts.blocks) };
    if (!this.watched?.inStep()) return undefined;
    return watchedFacts(node, known.facts, this.watched);
  }

  /** The CIDRs of the node's blocks as last known (a hint to read with, whatever its age). */
  blockCidrs(node: string): string[] {
    return Object.keys(this.facts.get(node)?.facts.blocks ?? {});
  }

  /** The node's blocks as last known, by CIDR (only `cidrs`, if given); copies. */
  blocks(node: string, cidrs?: readonly string[]): Record<string, Entry<Block> | null> {
    const known = this.facts.get(node)?.facts.blocks ?? {};
    if (!cidrs) return copies(known);
    return Object.fromEntries(cidrs.filter((cidr) => cidr in known).map((cidr) => [cidr, plainCopy(known[cidr] ?? null)]));
  }

  /**
   * Facts just read. `commitsAtRead` is what commits() said when the read began: what this agent's
   * commits since then wrote is newer than the read, and is kept (the blocks at their new
   * revisions, the affinities with a block just claimed). A read from before a change of the
   * affinities is dropped when nothing newer is known: it would have the next ADD claim a block
   * for want of knowing the one just claimed.
   */
  remember(node: string, facts: NodeFacts, commitsAtRead = this.commits(node)): void {
    const known = this.facts.get(node)?.facts;
    const written = this.commitsOn.get(node);
    const since = (count: number | undefined) => count !== undefined && count > commitsAtRead;
    const affinitiesChanged = since(written?.affinities);
    if (affinitiesChanged && !known) return;
    const blocks = { ...facts.blocks };
    if (known)
      for (const [cidr, count] of written?.blocks ?? [])
        if (since(count) && known.blocks[cidr] !== undefined) blocks[cidr] = known.blocks[cidr] ?? null;
    const affinityKeys = affinitiesChanged && known ? known.affinityKeys : facts.affinityKeys;
    this.facts.set(node, { at: this.now(), facts: { ...facts, affinityKeys, blocks: copies(blocks) } });
  }

  /**
   * A read of the node's facts in flight (settled either way once it is over), if one is: an ADD
   * that finds no fresh facts waits for it and decides on what it remembered, where a burst of
   * pods on a node with stale facts had each ADD read the same documents.
   */
  factsRead(node: string): Promise<unknown> | undefined {
    return this.reading.get(node);
  }

  /** `read` reads the node's facts (readAhead, which remembers them): factsRead() gives it until it settles. */
  readingFacts(node: string, read: Promise<unknown>): void {
    const settled = read.then(
      () => undefined,
      () => undefined,
    );
    this.reading.set(node, settled);
    settled.then(() => {
      if (this.reading.get(node) === settled) this.reading.delete(node);
    });
  }

  /** Drops what is known of the node (a commit decided on it failed). */
  forget(node: string): void {
    this.facts.delete(node);
  }

  /**
   * A commit on the node's blocks held: blocks and handles it wrote are known at their new
   * revisions. A change of the node's affinities (a block claimed or released) drops the facts.
   */
  committed(node: string, writes: readonly Write[], revisions: Record<string, string>): void {
    this.countCommit(node, writes);
    const known = this.facts.get(node);
    for (const write of writes) {
      if (write.key.startsWith(keys.handles) || write.key.startsWith(keys.workloadEndpoints)) this.written(write, revisions[write.key]);
      if (!known) continue;
      if (write.key.startsWith(keys.allAffinities)) {
        this.affinityWritten(node, known.facts, write);
        continue;
      }
      if (!isBlockKey(write.key)) continue;
      const cidr = cidrOfKey(write.key);
      const revision = revisions[write.key];
      if ('update' in write && revision) known.facts.blocks[cidr] = { key: write.key, value: plainCopy(write.update as Block), revision };
      else if ('create' in write && revision)
        known.facts.blocks[cidr] = { key: write.key, value: plainCopy(write.create as Block), revision };
      else if ('remove' in write) this.facts.delete(node);
    }
  }

  /** Counts a commit that wrote a block, and records at that count the blocks and affinities it wrote. */
  private countCommit(node: string, writes: readonly Write[]): void {
    if (!writes.some((write) => isBlockKey(write.key))) return;
    const commits = this.commitsOn.get(node) ?? { count: 0, blocks: new Map<string, number>(), affinities: 0 };
    commits.count++;
    for (const write of writes) {
      if (isBlockKey(write.key)) commits.blocks.set(cidrOfKey(write.key), commits.count);
      else if (write.key.startsWith(keys.allAffinities)) commits.affinities = commits.count;
    }
    this.commitsOn.set(node, commits);
  }

  /** How many commits on the node's blocks this agent has made: what was read before the count moved may be stale. */
  commits(node: string): number {
    return this.commitsOn.get(node)?.count ?? 0;
  }

  /** committed() for the node's commits, as allocate() and releaseWhere() take it. */
  committer(node: string): (writes: readonly Write[], revisions: Record<string, string>) => void {
    return (writes, revisions) => this.committed(node, writes, revisions);
  }

  /** A block claimed for the node is known among its affinities; anything else drops the facts. */
  private affinityWritten(node: string, facts: NodeFacts, write: Write): void {
    const cidr = cidrOfKey(write.key);
    const family = familyOf(cidr);
    const affinities = facts.affinityKeys[family];
    if ('create' in write && affinities && write.key === keys.affinity(node, cidr)) {
      if (!affinities.includes(write.key)) facts.affinityKeys[family] = [...affinities, write.key];
    } else this.facts.delete(node);
  }

  /** The handle as this agent last wrote it, if it did. */
  handle(key: string): Entry<Handle> | undefined {
    return this.document<Handle>(key);
  }

  /** A handle or workload endpoint as this agent last wrote it, if it did (a copy). */
  document<T>(key: string): Entry<T> | undefined {
    const entry = this.documents.get(key);
    return entry && (plainCopy(entry) as Entry<T>);
  }

  /** The document was removed (or is to be read again). */
  drop(key: string): void {
    this.documents.delete(key);
  }

  private written(write: Write, revision: string | undefined): void {
    this.documents.delete(write.key);
    const value = 'create' in write ? write.create : 'update' in write ? write.update : undefined;
    if (value === undefined || !revision) return;
    this.documents.set(write.key, { key: write.key, value: plainCopy(value), revision });
    if (this.documents.size > DOCUMENTS_KEPT) this.documents.delete(this.documents.keys().next().value as string);
  }
}

/**
 * The facts read last, with the pools as the watch has them and each block of the node at the newer
 * of the revisions the watch and this agent's commits gave it; the node's affinities are those of
 * both (a block just claimed may not have reached the watch yet).
 */
function watchedFacts(node: string, facts: NodeFacts, watched: WatchedIpam): NodeFacts {
  const blocks = copies(facts.blocks);
  for (const [cidr, entry] of watched.nodeBlocks(node)) {
    const mine = blocks[cidr];
    if (!mine || newer(entry.revision, mine.revision)) blocks[cidr] = plainCopy(entry);
  }
  const affinityKeys: NodeFacts['affinityKeys'] = {};
  for (const family of [4, 6] as const) {
    const watchedKeys = Object.keys(blocks)
      .filter((cidr) => familyOf(cidr) === family && blocks[cidr] !== null)
      .map((cidr) => keys.affinity(node, cidr));
    const read = facts.affinityKeys[family];
    if (read) affinityKeys[family] = [...new Set([...read, ...watchedKeys])].sort();
  }
  return { ...facts, pools: watched.pools(), affinityKeys, blocks };
}

/** Whether etcd revision `a` is later than `b`. */
const newer = (a: string, b: string): boolean => a.length > b.length || (a.length === b.length && a > b);

const copies = (blocks: Record<string, Entry<Block> | null>): Record<string, Entry<Block> | null> =>
  Object.fromEntries(Object.entries(blocks).map(([cidr, entry]) => [cidr, entry && plainCopy(entry)]));
