// One attempt of an allocation: the addresses it takes, block by block (claiming a block for the
// node when its own are full), the waiting ADDs it serves, and the writes that commit all of it.
import type { Entry, Write } from '../store/store.ts';
import { addressOf, assignNext, assignOrdinal, attributeAt, newBlock, ordinalOf, ordinalsOf, releaseOrdinals } from './block.ts';
import { contains, formatPrefix, mask, parseIp, widthOf, type Family } from '../net/cidr.ts';
import { exhausted, inUse, poolError } from './errors.ts';
import { cidrOfKey, familyOf, hostAffinity, keys } from '../model/keys.ts';
import type { Affinity, AllocationAttribute, Block, Handle, PendingRequest } from '../model/ipam-documents.ts';
import { checkedBlock, checkedHandle, checkedOrAbsent } from '../model/checked-documents.ts';
import { blockInPool, familyName, type Pool } from './pools.ts';

import type { Allocation, Assignment } from './assignment.ts';
import type { WaitingAdd } from './waiting-adds.ts';

/**
 * How many waiting ADDs one commit serves at most: each costs two operations (its handle, and its
 * pending request's removal or its workload endpoint), and etcd allows 128 per transaction.
 */
export const SERVE_AT_MOST = 32;

/** A waiting ADD's handle as a commit creates it, and the addresses it holds. */
interface ServedHandle {
  handle: { key: string; create: Handle };
  allocations: Allocation[];
}

/** The allocations of one attempt and the writes that make them. */
export class Plan {
  readonly allocations: Allocation[] = [];
  readonly writes: Write[] = [];
  private readonly touched = new Map<string, Block>();
  private readonly request: Assignment;
  private readonly attribute: AllocationAttribute;
  private readonly knownBlocks: Record<string, Entry<Block> | null>;
  /** The node's blocks this attempt looked at: what a retry wants to know again. */
  readonly blocksRead: string[] = [];
  /** Handles of waiting ADDs this attempt serves. */
  private readonly servedHandles: Write[] = [];
  /** Writes that go after the blocks' (an earlier sandbox's handle giving up an address). */
  readonly laterWrites: Write[] = [];

  constructor(request: Assignment, knownBlocks: Record<string, Entry<Block> | null> = {}) {
    this.request = request;
    this.knownBlocks = knownBlocks;
    this.attribute = { handle_id: request.handle, secondary: request.attributes };
  }

  private get now(): Date {
    return this.request.now ?? new Date();
  }

  /**
   * Any free address of the family: a block of this node, else a new block, else another node's.
   * One of `preferred`, if free in a block of this node: what an earlier attempt planned, and the
   * pod's interface may already have been set up with.
   */
  async any(family: Family, pools: readonly Pool[], affinityKeys?: string[], preferred: readonly string[] = []): Promise<void> {
    const { store, node } = this.request;
    const inPools = (cidr: string) => pools.some((pool) => blockInPool(cidr, pool));
    const affine = (affinityKeys ?? (await store.listKeys(keys.affinities(node, family)))).map(cidrOfKey).filter(inPools);
    this.blocksRead.push(...affine);
    const known = affine.every((cidr) => this.knownBlocks[cidr] !== undefined);
    const entries = (
      known
        ? affine.map((cidr) => this.knownBlocks[cidr] ?? undefined)
        : affine.length > 0
          ? ((await store.read(affine.map((cidr) => ({ get: keys.block(cidr) })))) as (Entry<unknown> | undefined)[]).map((e) =>
              checkedOrAbsent(checkedBlock, e),
            )
          : []
    ) as (Entry<Block> | undefined)[];
    for (const entry of entries) {
      if (!entry) continue;
      for (const ip of preferred) {
        const ordinal = ordinalOf(entry.value, ip);
        if (ordinal !== undefined && assignOrdinal(entry.value, ordinal, this.attribute) && this.take(entry.value, ordinal, entry)) return;
      }
    }
    for (const [i, cidr] of affine.entries()) {
      // An affinity whose block a crash lost (only possible without transactions) gets its block again.
      const entry = entries[i];
      const block = entry?.value ?? newBlock(cidr, hostAffinity(node), this.now);
      if (this.take(block, assignNext(block, this.attribute), entry)) return;
    }
    // A new block, claimed with its affinity in the same commit: no half-claimed block.
    const existing = new Set((await store.listKeys(keys.blocks(family))).map(cidrOfKey));
    for (const pool of pools) {
      for (const cidr of candidateBlocks(pool, node)) {
        if (existing.has(cidr)) continue;
        const block = newBlock(cidr, hostAffinity(node), this.now);
        this.writes.push({ key: keys.affinity(node, cidr), create: { state: 'confirmed', deleted: false } satisfies Affinity });
        this.take(block, assignNext(block, this.attribute), undefined);
        return;
      }
    }
    // Borrow from a block another node owns.
    for (const entry of (await store.list(keys.blocks(family))).map(checkedBlock)) {
      if (inPools(entry.value.cidr) && this.take(entry.value, assignNext(entry.value, this.attribute), entry)) return;
    }
    throw exhausted(`no free ${familyName(family)} address in ${pools.map((p) => `pool "${p.name}" (${p.spec.cidr})`).join(', ')}`);
  }

  /** Exactly `ip`, which must lie in an enabled pool and be free. */
  async exact(ip: string, pools: readonly Pool[]): Promise<void> {
    const parsed = parseIp(ip);
    const pool =
      parsed &&
      pools.find(
        (p) =>
          !p.spec.disabled && p.prefix.family === parsed.family && (parsed.value & mask(parsed.family, p.prefix.length)) === p.prefix.base,
      );
    if (!parsed || !pool) {
      const disabled = parsed && pools.find((p) => contains(p.prefix, parsed.family, parsed.value));
      if (disabled) throw poolError(`the requested address ${ip} is in pool "${disabled.name}" (${disabled.spec.cidr}), which is disabled`);
      throw poolError(`the requested address ${ip} is not in any enabled pool`);
    }
    const cidr = formatPrefix({
      family: parsed.family,
      base: parsed.value & mask(parsed.family, pool.spec.blockSize),
      length: pool.spec.blockSize,
    });
    const entry = checkedOrAbsent(checkedBlock, await this.request.store.get(keys.block(cidr)));
    const block = entry?.value ?? newBlock(cidr, hostAffinity(this.request.node), this.now);
    const ordinal = ordinalOf(block, ip) as number;
    const holder = attributeAt(block, ordinal);
    if (holder) {
      if (!this.samePod(holder)) throw inUse(`the requested address ${ip} is in use (${describe(holder)})`);
      // An earlier sandbox of the same pod holds it (a pod with a fixed address, re-created):
      // the address passes to the new sandbox in this commit, as the reference releases it first.
      await this.releaseFromEarlierSandbox(block, ordinal, holder.handle_id);
    }
    if (!entry)
      this.writes.push({ key: keys.affinity(this.request.node, cidr), create: { state: 'confirmed', deleted: false } satisfies Affinity });
    this.take(block, assignOrdinal(block, ordinal, this.attribute) ? ordinal : undefined, entry);
  }

  /**
   * Allocates for waiting ADDs of this node too, from the blocks this attempt already takes
   * addresses from: each is served entirely or not at all, and at most SERVE_AT_MOST of them
   * (counting those serve() and serveWaiting() took before).
   */
  serve(pending: readonly Entry<PendingRequest>[], pools: readonly Pool[]): void {
    for (const entry of pending) {
      if (this.servedHandles.length >= SERVE_AT_MOST) return;
      if (this.serveOne(entry.value, pools)) this.writes.push({ key: entry.key, remove: true, revision: entry.revision });
    }
  }

  /** serve() for ADDs queued in a resident agent's memory (waiting-adds.ts): what each is given, to tell it once the commit holds. */
  serveWaiting(adds: readonly WaitingAdd[], pools: readonly Pool[]): ({ add: WaitingAdd } & ServedHandle)[] {
    const served = [];
    for (const add of adds) {
      if (this.servedHandles.length >= SERVE_AT_MOST) break;
      const given = this.serveOne(add.request, pools);
      if (given) served.push({ add, ...given });
    }
    return served;
  }

  private serveOne({ handle, attributes, requests }: PendingRequest, pools: readonly Pool[]): ServedHandle | undefined {
    // The same container's ADD twice (a runtime's retry): one commit creates its handle once.
    if (handle === this.request.handle || this.servedHandles.some((w) => w.key === keys.handle(handle))) return undefined;
    const room = new Map([...this.touched.values()].map((block) => [block, block.unallocated.length]));
    const picks: Block[] = [];
    for (const r of requests ?? []) {
      // A pool disabled since the request was made serves it no more.
      const inPools = (cidr: string) => pools.some((p) => !p.spec.disabled && r.pools.includes(p.name) && blockInPool(cidr, p));
      const block = [...room.keys()].find((b) => familyOf(b.cidr) === r.family && inPools(b.cidr) && (room.get(b) ?? 0) > 0);
      if (!block) break;
      room.set(block, (room.get(block) ?? 0) - 1);
      picks.push(block);
    }
    if (picks.length === 0 || picks.length !== (requests ?? []).length) return undefined;
    const attribute: AllocationAttribute = { handle_id: handle, secondary: attributes };
    const allocations = picks.map((block) => {
      const ordinal = assignNext(block, attribute) as number;
      return { address: addressOf(block, ordinal), family: familyOf(block.cidr), block: block.cidr };
    });
    const counts = Object.fromEntries(picks.map((block) => [block.cidr, ordinalsOf(block, handle).length]));
    const write = { key: keys.handle(handle), create: { handleID: handle, block: counts, deleted: false } satisfies Handle };
    this.servedHandles.push(write);
    return { handle: write, allocations };
  }

  private samePod(holder: AllocationAttribute): boolean {
    const { namespace, pod } = this.request.attributes;
    return (
      pod !== undefined &&
      holder.handle_id !== this.request.handle &&
      holder.secondary['pod'] === pod &&
      holder.secondary['namespace'] === namespace
    );
  }

  private async releaseFromEarlierSandbox(block: Block, ordinal: number, handle: string): Promise<void> {
    releaseOrdinals(block, [ordinal]);
    const entry = checkedOrAbsent(checkedHandle, await this.request.store.get(keys.handle(handle)));
    if (!entry) return;
    const counts = { ...entry.value.block, [block.cidr]: ordinalsOf(block, handle).length };
    if (counts[block.cidr] === 0) delete counts[block.cidr];
    this.laterWrites.push(
      Object.keys(counts).length === 0
        ? { key: entry.key, remove: true, revision: entry.revision }
        : { key: entry.key, update: { ...entry.value, block: counts }, revision: entry.revision },
    );
  }

  /** Records the block's new state; false if it had no room. */
  private take(block: Block, ordinal: number | undefined, entry: Entry<Block> | undefined): boolean {
    if (ordinal === undefined) return false;
    this.touched.set(block.cidr, block);
    this.writes.push(entry ? { key: entry.key, update: block, revision: entry.revision } : { key: keys.block(block.cidr), create: block });
    this.allocations.push({ address: addressOf(block, ordinal), family: familyOf(block.cidr), block: block.cidr });
    return true;
  }

  /** The handle with its count in every block it now holds addresses in (nothing if unchanged), then the served ones. */
  handleWrites(handleEntry: Entry<Handle> | undefined): Write[] {
    if (this.touched.size === 0) return this.servedHandles;
    const { handle } = this.request;
    const counts = { ...handleEntry?.value.block };
    for (const [cidr, block] of this.touched) counts[cidr] = ordinalsOf(block, handle).length;
    const value: Handle = { handleID: handle, block: counts, deleted: false };
    return [
      handleEntry ? { key: handleEntry.key, update: value, revision: handleEntry.revision } : { key: keys.handle(handle), create: value },
      ...this.servedHandles,
    ];
  }
}

/** Block CIDRs of a pool, starting at a place that depends on the node: nodes spread out. */
function* candidateBlocks(pool: Pool, node: string): Generator<string> {
  const { family } = pool.prefix;
  const count = 1n << BigInt(pool.spec.blockSize - pool.prefix.length);
  const step = 1n << BigInt(widthOf(family) - pool.spec.blockSize);
  const start = BigInt(fnv1a(node)) % count;
  for (let i = 0n; i < count; i++) {
    const index = (start + i) % count;
    yield formatPrefix({ family, base: pool.prefix.base + index * step, length: pool.spec.blockSize });
  }
}

/** Whether an allocation recorded for `ifname` serves the interface of `request`. */
export function sameInterface(ifname: string | undefined, request: Pick<Assignment, 'attributes'>): boolean {
  return ifname === undefined || ifname === request.attributes['ifname'];
}

function describe(attribute: AllocationAttribute): string {
  const { node, namespace, pod } = attribute.secondary;
  const who = pod ? `pod ${namespace}/${pod}` : `handle ${attribute.handle_id}`;
  return node ? `${who} on node ${node}` : who;
}

/** 32-bit FNV-1a of the node name, as the reference seeds its block search. */
function fnv1a(text: string): number {
  let hash = 0x811c9dc5;
  for (const byte of Buffer.from(text)) hash = Math.imul(hash ^ byte, 0x01000193) >>> 0;
  return hash;
}
