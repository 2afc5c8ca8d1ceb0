// The reads an address manager's command starts with, issued early (while the rest of the command
// loads) and, in a resident agent, spared where it already knows the answers (known-nodes.ts).
import type { Family } from '../net/cidr.ts';
import type { Entry, Read, Store } from '../store/store.ts';
import { affineCidrs, blockReads, blocksFrom, firstReads } from './known-state.ts';
import { CLUSTER_INFO_KEY } from '../model/cluster-information.ts';
import type { KnownNodes, NodeFacts } from './known-nodes.ts';
import type { ReadForRelease } from './release.ts';
import { cidrOfKey, keys } from '../model/keys.ts';
import type { Block } from '../model/ipam-documents.ts';
import type { NodeResource } from '../model/node.ts';
import type { PoolResource } from '../model/ip-pool.ts';

export interface Prefetched {
  reads: Read[];
  results: Promise<ReadAhead>;
}

/** addReads()' results, and the blocks of the node's affinities among them. */
export interface ReadAhead {
  results: unknown[];
  blocks: Record<string, Entry<Block> | null>;
  /**
   * Not read: the agent's knowledge of the node, this attachment's handle and companions taken
   * to be absent. The commit must state the facts as conditions (see NetplugIpam.add).
   */
  assumed?: boolean;
  /** In a resident agent: its commits on the node when these were read (KnownNodes.commits). */
  commits?: number;
}

/**
 * Every read the first attempt of an ADD needs, for one round trip: pools, the node, the handle,
 * its affinities, the companions, and last ClusterInformation (whether a migration locked the
 * datastore; in etcd's one transaction it costs no round trip of its own).
 */
export function addReads(handle: string, node: string, families: readonly Family[], companionKeys: readonly string[]): Read[] {
  return [{ list: keys.pools }, { get: keys.node(node) }, ...firstReads(handle, node, families, companionKeys), { get: CLUSTER_INFO_KEY }];
}

/**
 * The round trips an ADD starts with: addReads(), then the blocks they show the node has. With
 * `known` (an agent's), the blocks the node had last are read with addReads(), in the same round
 * trip (and snapshot), only blocks the affinities name beyond them need a second one; and what was
 * read is remembered for the next ADD.
 */
export async function readAhead(
  store: Store,
  reads: Read[],
  families: readonly Family[],
  known?: { node: string; nodes: KnownNodes },
): Promise<ReadAhead> {
  const hinted = known ? known.nodes.blockCidrs(known.node) : [];
  const commits = known?.nodes.commits(known.node);
  const all = await store.read([...reads, ...blockReads(hinted)]);
  const results = all.slice(0, reads.length);
  const cidrs = affineCidrs(results.slice(2), families);
  const found = blocksFrom(hinted, all.slice(reads.length));
  const missing = cidrs.filter((cidr) => !(cidr in found));
  const more = missing.length > 0 ? blocksFrom(missing, await store.read(blockReads(missing))) : {};
  const blocks = Object.fromEntries(cidrs.map((cidr) => [cidr, found[cidr] ?? more[cidr] ?? null]));
  known?.nodes.remember(
    known.node,
    {
      pools: results[0] as Entry<PoolResource>[],
      node: results[1] as Entry<NodeResource> | undefined,
      clusterInfo: results.at(-1) as Entry<unknown> | undefined,
      affinityKeys: Object.fromEntries(families.map((family, i) => [family, results[3 + i] as string[]])),
      blocks,
    },
    commits,
  );
  return { results, blocks, ...(commits !== undefined ? { commits } : {}) };
}

/**
 * An ADD's first reads as the agent knows them, in addReads()' layout, if it knows them all: the
 * node's facts, fresh, and this attachment's handle and `companions` taken to be absent (a new
 * container's are; a commit creating them fails otherwise).
 */
export function assumedAhead(
  facts: NodeFacts | undefined,
  families: readonly Family[],
  companions: number,
  commits?: number,
): ReadAhead | undefined {
  if (!facts || families.some((family) => !facts.affinityKeys[family])) return undefined;
  const affinities = families.map((family) => facts.affinityKeys[family] as string[]);
  const results = [
    facts.pools,
    facts.node,
    undefined,
    ...affinities,
    ...Array.from({ length: companions }, () => undefined),
    facts.clusterInfo,
  ];
  const cidrs = affineCidrs(results.slice(2), families);
  if (cidrs.some((cidr) => !(cidr in facts.blocks))) return undefined;
  return {
    results,
    blocks: Object.fromEntries(cidrs.map((cidr) => [cidr, facts.blocks[cidr] ?? null])),
    assumed: true,
    ...(commits !== undefined ? { commits } : {}),
  };
}

/**
 * A DEL's first read, for a resident agent: the handle and the node's blocks, in one round trip
 * (the handle's blocks are most likely among them); none if the agent wrote the handle itself and
 * knows its blocks (the release's conditions catch any change since).
 */
export function prefetchRelease(store: Promise<Store>, handle: string, node: string, nodes: KnownNodes): Prefetched {
  const known = knownRelease(nodes, node, handle);
  if (known) {
    const cidrs = Object.keys(known.blocks);
    const reads = [{ get: keys.handle(handle) }, ...blockReads(cidrs)];
    return {
      reads,
      results: Promise.resolve({ results: [known.handle, ...cidrs.map((cidr) => known.blocks[cidr])], blocks: {}, assumed: true }),
    };
  }
  const reads = [{ get: keys.handle(handle) }, ...blockReads(nodes.blockCidrs(node))];
  return { reads, results: store.then(async (s) => ({ results: await s.read(reads), blocks: {} })) };
}

/** A release's first reads as the agent knows them: the handle it wrote, and the node's blocks that handle holds addresses in. */
export function knownRelease(nodes: KnownNodes, node: string, handle: string): ReadForRelease | undefined {
  const written = nodes.handle(keys.handle(handle));
  if (!written) return undefined;
  const cidrs = Object.keys(written.value.block);
  const blocks = nodes.blocks(node, cidrs);
  if (!cidrs.every((cidr) => blocks[cidr])) return undefined;
  return { handle: written, blocks: Object.fromEntries(cidrs.map((cidr) => [cidr, blocks[cidr] ?? undefined])) };
}

/** prefetchRelease()'s results as releaseWhere() takes them. */
export async function readForRelease(prefetched: Prefetched): Promise<ReadForRelease | undefined> {
  const results = await prefetched.results.then(
    (r) => r.results,
    () => undefined, // read again in the turn, which reports what fails
  );
  if (!results) return undefined;
  const cidrs = prefetched.reads.slice(1).map((read) => cidrOfKey((read as { get: string }).get));
  return {
    handle: results[0] as Entry<unknown> | undefined,
    blocks: Object.fromEntries(cidrs.map((cidr, i) => [cidr, results[i + 1] as Entry<unknown> | undefined])),
  };
}
