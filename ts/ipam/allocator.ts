// Allocating addresses, block by block, with compare-and-swap and no host-wide lock: concurrent
// allocations on one node race on a block's revision and the losers retry, instead of queueing
// behind a file lock as the reference's do.
//
// One ADD is one transaction: the addresses of every family, the handle that records them, new
// blocks with their affinities, and the caller's own documents (the workload endpoint) commit
// together or not at all. The handle comes first in the commit, so that a datastore applying the
// writes one by one (etcd applies them atomically anyway) never has an address without its handle.
import type { Entry, Read, Store, Write } from '../store/store.ts';
import { retryOnConflict } from '../store/store.ts';
import { addressOf, assignNext, assignOrdinal, attributeAt, newBlock, ordinalOf, ordinalsOf, releaseOrdinals } from './block.ts';
import { contains, formatPrefix, mask, parseIp, widthOf, type Family } from '../net/cidr.ts';
import { exhausted, inUse, poolError } from './errors.ts';
import {
  checkedBlock,
  checkedHandle,
  checkedOrAbsent,
  cidrOfKey,
  familyOf,
  isPendingRequest,
  hostAffinity,
  keys,
  type Affinity,
  type AllocationAttribute,
  type Block,
  type Handle,
  type PendingRequest,
} from './model.ts';
import { blockInPool, familyName, type Pool } from './pools.ts';
import { releaseWhere } from './release.ts';

export interface Allocation {
  address: string;
  family: Family;
  /** The CIDR of the block it came from; its prefix length is what delegating plugins get. */
  block: string;
  /** The interface it was allocated for (a handle is a container; it may have several). */
  ifname?: string;
}

export interface Assignment {
  store: Store;
  handle: string;
  node: string;
  /** Recorded with the address: node, pod, namespace, interface, time. */
  attributes: Record<string, string>;
  now?: Date;
}

/** One address to allocate: any of the family from `pools`, or exactly `ip` (which must lie in one). */
export type AddressRequest = { family: Family; pools: readonly Pool[] } | { ip: string; pools: readonly Pool[] };

/** A document the caller commits with the allocation, written whether it exists yet or not. */
export interface Companion {
  key: string;
  /** The document, given the addresses allocated and the document as it stands (if it exists). */
  value(addresses: readonly string[], current: unknown): unknown;
}

/** What the caller already read, to spare the first attempt those round trips. */
export interface KnownState {
  /** The handle's entry; null when it is known not to exist. */
  handle?: Entry<Handle> | null;
  /** The keys of the node's affinities, per family. */
  affinityKeys?: Partial<Record<Family, string[]>>;
  /** The companions' entries (null: known absent), by key. */
  companions?: Record<string, Entry<unknown> | null>;
  /** Blocks by CIDR (null: known absent): those the node's affinities name. */
  blocks?: Record<string, Entry<Block> | null>;
  /** The node's pending requests. */
  pending?: Entry<PendingRequest>[];
}

/** The reads that give `allocate` its KnownState, for a caller that batches them with its own. */
export function firstReads(handle: string, node: string, families: readonly Family[], companionKeys: readonly string[]): Read[] {
  return [
    { get: keys.handle(handle) },
    ...families.map((family) => ({ keys: keys.affinities(node, family) })),
    ...companionKeys.map((key) => ({ get: key })),
  ];
}

export function knownFrom(
  results: readonly unknown[],
  families: readonly Family[],
  companionKeys: readonly string[],
  blocks?: KnownState['blocks'],
): KnownState {
  const [handle, ...rest] = results;
  return {
    handle: checkedOrAbsent(checkedHandle, handle as Entry<unknown> | undefined) ?? null,
    affinityKeys: Object.fromEntries(families.map((family, i) => [family, rest[i] as string[]])),
    companions: Object.fromEntries(companionKeys.map((key, i) => [key, (rest[families.length + i] as Entry<unknown> | undefined) ?? null])),
    ...(blocks ? { blocks } : {}),
  };
}

/** The blocks the affinity keys among `results` (as firstReads() lays them out) name, in one read. */
export async function affineBlocks(
  store: Store,
  results: readonly unknown[],
  families: readonly Family[],
): Promise<Record<string, Entry<Block> | null>> {
  const cidrs = (results.slice(1, 1 + families.length) as string[][]).flat().map(cidrOfKey);
  const entries = (cidrs.length > 0 ? await store.read(cidrs.map((cidr) => ({ get: keys.block(cidr) }))) : []) as (
    | Entry<unknown>
    | undefined
  )[];
  return Object.fromEntries(cidrs.map((cidr, i) => [cidr, checkedOrAbsent(checkedBlock, entries[i]) ?? null]));
}

/** The addresses `handle` holds, in the order of its blocks. */
export async function addressesOf(store: Store, handle: string, handleEntry?: Entry<Handle>): Promise<Allocation[]> {
  const entry = handleEntry ?? checkedOrAbsent(checkedHandle, await store.get(keys.handle(handle)));
  if (!entry) return [];
  const cidrs = Object.keys(entry.value.block);
  const blocks = (cidrs.length > 0 ? await store.read(cidrs.map((cidr) => ({ get: keys.block(cidr) }))) : []) as (
    | Entry<unknown>
    | undefined
  )[];
  return blocks.flatMap((blockEntry) => {
    const block = checkedOrAbsent(checkedBlock, blockEntry)?.value;
    if (!block) return [];
    return ordinalsOf(block, handle).map((ordinal) => {
      const ifname = attributeAt(block, ordinal)?.secondary['ifname'];
      return { address: addressOf(block, ordinal), family: familyOf(block.cidr), block: block.cidr, ...(ifname ? { ifname } : {}) };
    });
  });
}

export interface AllocateOptions {
  /** Documents committed with the allocation (the workload endpoint). */
  companions?: readonly Companion[];
  /** What the caller already read. */
  known?: KnownState;
  /** Every pool, to serve other ADDs waiting on this node (their requests name pools). */
  pools?: readonly Pool[];
}

/** How many waiting ADDs one commit serves at most (etcd allows 128 operations per transaction). */
const SERVE_AT_MOST = 32;
/** Waiting requests older than this are not served: their ADD has likely given up. */
const PENDING_FRESH_MS = 10_000;

/**
 * One address per request for the handle, with the companions, in one commit. What the handle
 * already holds for the same interface (a repeated ADD) is returned again: a retry never takes a
 * second address.
 *
 * When the commit loses a race for the node's block, the ADD leaves a pending request beside it
 * (in the same round trip); whoever commits next on the node allocates for the pending requests
 * too. A burst of pods on one node so needs a few commits, not one per pod each racing all the
 * others.
 */
export async function allocate(
  request: Assignment,
  requests: readonly AddressRequest[],
  options: AllocateOptions = {},
): Promise<Allocation[]> {
  const { store, handle } = request;
  if (store.transactional || requests.length < 2) return allocateInOneCommit(request, requests, options);
  // Without transactions, one block per commit: the first address alone, then each next one with
  // those before it (which the handle then holds, so they cost no write), the companions last. A
  // commit so never has a second block to undo after its last write lost a race. Addresses of an
  // attachment that held none before are released again if a later step fails.
  const held = options.known?.handle !== undefined ? options.known.handle !== null : (await store.get(keys.handle(handle))) !== undefined;
  const { known, companions, ...rest } = options;
  try {
    for (let n = 1; n < requests.length; n++)
      await allocateInOneCommit(request, requests.slice(0, n), n === 1 && known ? { ...rest, known } : rest);
    return await allocateInOneCommit(request, requests, companions ? { ...rest, companions } : rest);
  } catch (err) {
    if (!held)
      await releaseWhere(store, handle, (attribute) => sameInterface(attribute.secondary['ifname'], request)).catch(() => undefined);
    throw err;
  }
}

async function allocateInOneCommit(
  request: Assignment,
  requests: readonly AddressRequest[],
  options: AllocateOptions,
): Promise<Allocation[]> {
  const { store, handle, node } = request;
  const companions = options.companions ?? [];
  for (const r of requests) {
    if ('family' in r && r.pools.length === 0) throw poolError(`no enabled ${familyName(r.family)} pool selects node "${node}"`);
  }
  const families = requests.flatMap((r) => ('family' in r ? [r.family] : []));
  const companionKeys = companions.map((c) => c.key);
  const pendingKey = keys.pendingRequest(node, handle);
  // What the next attempt knows: the caller's reads at first, then what a lost race returned.
  let state = options.known ?? {};
  let waiting = false;
  try {
    return await retryOnConflict(`allocating addresses for ${handle}`, async () => {
      const first = state;
      state = {};
      const handleEntry =
        first.handle !== undefined ? (first.handle ?? undefined) : checkedOrAbsent(checkedHandle, await store.get(keys.handle(handle)));
      const held = handleEntry ? (await addressesOf(store, handle, handleEntry)).filter((a) => sameInterface(a.ifname, request)) : [];
      const plan = new Plan(request, first.blocks);
      for (const r of requests) {
        const same = 'ip' in r ? held.find((a) => a.address === r.ip) : held.find((a) => a.family === r.family);
        if (same) plan.allocations.push(same);
        else if ('ip' in r) await plan.exact(r.ip, r.pools);
        else await plan.any(r.family, r.pools, first.affinityKeys?.[r.family]);
      }
      const pending = first.pending ?? [];
      // A request that cannot be served (a broken document) goes as if it were stale.
      const fresh = (p: Entry<PendingRequest>) => isPendingRequest(p.value) && Date.now() - Date.parse(p.value.created) < PENDING_FRESH_MS;
      // Serving others needs the commit to be one transaction: applied one write at a time, a
      // commit that serves others has more writes to fail and undo part-way.
      if (store.transactional)
        plan.serve(
          pending.filter((p) => p.key !== pendingKey && fresh(p)),
          options.pools ?? [],
        );
      // Requests of ADDs that died waiting go with this commit.
      const stale = pending.filter((p) => p.key !== pendingKey && !fresh(p)).slice(0, SERVE_AT_MOST);
      const own = pending.find((p) => p.key === pendingKey);
      const companionWrites = await Promise.all(
        companions.map(async (companion) => {
          const current =
            first.companions?.[companion.key] !== undefined
              ? (first.companions[companion.key] ?? undefined)
              : await store.get(companion.key);
          const value = companion.value(
            plan.allocations.map((a) => a.address),
            current?.value,
          );
          return current ? { key: companion.key, update: value, revision: current.revision } : { key: companion.key, create: value };
        }),
      );
      // The blocks last: a datastore without transactions applies the writes in this order, and a
      // block is the write most likely to lose a race. Losing it then undoes only writes nobody
      // else touches (this handle, this pod's endpoint), and a crash before it leaves a handle
      // without addresses, which DEL and GC clean, never an address without a handle.
      const isBlock = (w: Write) => w.key.startsWith(keys.blocks(4)) || w.key.startsWith(keys.blocks(6));
      const writes: Write[] = [
        ...plan.handleWrites(handleEntry),
        ...plan.writes.filter((w) => !isBlock(w)),
        ...plan.laterWrites,
        ...[own, ...stale].flatMap((p) => (p ? [{ key: p.key, remove: true as const, revision: p.revision }] : [])),
        ...companionWrites,
        ...plan.writes.filter(isBlock),
      ];
      if (writes.length === 0) return plan.allocations;
      const refresh: Read[] = [
        ...firstReads(handle, node, families, companionKeys),
        ...plan.blocksRead.map((cidr) => ({ get: keys.block(cidr) })),
        { list: keys.pending(node) },
      ];
      // Only a fresh allocation of any addresses can be served by someone else.
      const wait = store.transactional && !waiting && !handleEntry && requests.every((r) => 'family' in r);
      const waitingRequest: PendingRequest = {
        handle,
        attributes: request.attributes,
        requests: requests.flatMap((r) => ('family' in r ? [{ family: r.family, pools: r.pools.map((p) => p.name) }] : [])),
        created: new Date().toISOString(),
      };
      const outcome = await store.commitElseRead(writes, refresh, wait ? [{ key: pendingKey, value: waitingRequest }] : []);
      if (outcome.committed) {
        waiting = false;
        return plan.allocations;
      }
      waiting ||= wait;
      const { results } = outcome;
      const blocks = results.slice(results.length - 1 - plan.blocksRead.length, results.length - 1) as (Entry<unknown> | undefined)[];
      const known = plan.blocksRead.map((cidr, i) => [cidr, checkedOrAbsent(checkedBlock, blocks[i]) ?? null]);
      state = {
        ...knownFrom(results, families, companionKeys, Object.fromEntries(known)),
        pending: results.at(-1) as Entry<PendingRequest>[],
      };
      return undefined;
    });
  } finally {
    // Given up (an error): a pending request left behind would have someone allocate for nobody.
    if (waiting) {
      const left = await store.get(pendingKey).catch(() => undefined);
      if (left) await store.commit([{ key: pendingKey, remove: true, revision: left.revision }]).catch(() => undefined);
    }
  }
}

/** The allocations of one attempt and the writes that make them. */
class Plan {
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

  /** Any free address of the family: a block of this node, else a new block, else another node's. */
  async any(family: Family, pools: readonly Pool[], affinityKeys?: string[]): Promise<void> {
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
   * addresses from: each is served entirely or not at all, and at most SERVE_AT_MOST of them.
   */
  serve(pending: readonly Entry<PendingRequest>[], pools: readonly Pool[]): void {
    for (const entry of pending.slice(0, SERVE_AT_MOST)) {
      const { handle, attributes, requests } = entry.value;
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
      if (picks.length === 0 || picks.length !== (requests ?? []).length) continue;
      const attribute: AllocationAttribute = { handle_id: handle, secondary: attributes };
      for (const block of picks) assignNext(block, attribute);
      const counts = Object.fromEntries(picks.map((block) => [block.cidr, ordinalsOf(block, handle).length]));
      this.servedHandles.push({ key: keys.handle(handle), create: { handleID: handle, block: counts, deleted: false } satisfies Handle });
      this.writes.push({ key: entry.key, remove: true, revision: entry.revision });
    }
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
