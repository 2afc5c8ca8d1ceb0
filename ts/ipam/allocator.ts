// Allocating addresses, block by block, with compare-and-swap and no host-wide lock: concurrent
// allocations on one node race on a block's revision and the losers retry, instead of queueing
// behind a file lock as the reference's do.
//
// One ADD is one transaction: the addresses of every family, the handle that records them, new
// blocks with their affinities, and the caller's own documents (the workload endpoint) commit
// together or not at all. The handle comes first in the commit, so that a datastore applying the
// writes one by one (etcd applies them atomically anyway) never has an address without its handle.
import type { Entry, Read, Write } from '../store/store.ts';
import { retryOnConflict, StoreUnavailableError } from '../store/store.ts';
import { KubeUnavailableError } from '../k8s/errors.ts';
import { poolError } from './errors.ts';
import { addressesOf, firstReads, knownFrom, type KnownState } from './known-state.ts';
import { isBlockKey, keys } from '../model/keys.ts';
import type { PendingRequest } from '../model/ipam-documents.ts';
import { checkedBlock, checkedHandle, checkedOrAbsent, isPendingRequest } from '../model/checked-documents.ts';
import { familyName, type Pool } from './pools.ts';
import { releaseWhere, withdrawPendingRequest } from './release.ts';

import { companionWrite, type AddressRequest, type Allocation, type Assignment, type Companion } from './assignment.ts';
import { Plan, SERVE_AT_MOST, sameInterface } from './plan.ts';
import type { WaitingAdds } from './waiting-adds.ts';

export type { AddressRequest, Allocation, Assignment, Companion } from './assignment.ts';
export { sameInterface } from './plan.ts';

export interface AllocateOptions {
  /** Documents committed with the allocation (the workload endpoint). */
  companions?: readonly Companion[];
  /** What the caller already read. */
  known?: KnownState;
  /** Every pool, to serve other ADDs waiting on this node (their requests name pools). */
  pools?: readonly Pool[];
  /** A document the allocation was decided on (ClusterInformation: not locked for a migration). */
  precondition?: Precondition;
  /**
   * Told the addresses each attempt is about to commit, as its commit leaves: the caller may
   * prepare with them meanwhile (the data plane), and must not act on them before add() returns.
   */
  planned?: (allocations: readonly Allocation[]) => void;
  /**
   * Conditions on facts the caller did not read but knew (a resident agent's knowledge): stated in
   * the first attempt's commit, which, failing, throws StaleFactsError (the caller reads afresh).
   */
  assumptions?: readonly Write[];
  /**
   * Addresses to take if free, before the block's next: those an earlier attempt planned (the
   * pod's interface may be set up with them already). Each retry prefers what the one before planned.
   */
  prefer?: readonly string[];
  /** Told each commit that held, with the revisions it made. */
  committed?: (writes: readonly Write[], revisions: Record<string, string>) => void;
  /** ADDs of the node queued in a resident agent's memory, which each commit serves too (a group commit). */
  waiting?: WaitingAdds;
}

/** An allocation decided on known facts failed its commit: something changed; read, and decide again. */
export class StaleFactsError extends Error {
  override readonly name = 'StaleFactsError';
}

/**
 * A document whose change since the caller read it fails the allocation's commit (on etcd in the
 * same transaction); the retry reads it again and `check` refuses (throws) or lets it go on.
 */
export interface Precondition {
  key: string;
  /** As read; undefined when it did not exist. */
  entry: Entry<unknown> | undefined;
  check(entry: Entry<unknown> | undefined): void;
}

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
  const { known, companions, planned, assumptions, ...rest } = options;
  try {
    for (let n = 1; n < requests.length; n++)
      await allocateInOneCommit(
        request,
        requests.slice(0, n),
        n === 1 ? { ...rest, ...(known ? { known } : {}), ...(assumptions ? { assumptions } : {}) } : rest,
      );
    // Only the last commit holds every address.
    return await allocateInOneCommit(request, requests, {
      ...rest,
      ...(companions ? { companions } : {}),
      ...(planned ? { planned } : {}),
    });
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
  let precondition = options.precondition;
  let assumptions = options.assumptions ?? [];
  let prefer = options.prefer ?? [];
  let waiting = false;
  let serveWaiting = true;
  try {
    return await retryOnConflict(`allocating addresses for ${handle}`, async () => {
      const first = state;
      state = {};
      const handleEntry =
        first.handle !== undefined ? (first.handle ?? undefined) : checkedOrAbsent(checkedHandle, await store.get(keys.handle(handle)));
      const held =
        first.held ?? (handleEntry ? (await addressesOf(store, handle, handleEntry)).filter((a) => sameInterface(a.ifname, request)) : []);
      const plan = new Plan(request, first.blocks);
      for (const r of requests) {
        const same = 'ip' in r ? held.find((a) => a.address === r.ip) : held.find((a) => a.family === r.family);
        if (same) plan.allocations.push(same);
        else if ('ip' in r) await plan.exact(r.ip, r.pools);
        else await plan.any(r.family, r.pools, first.affinityKeys?.[r.family], prefer);
      }
      const pending = first.pending ?? [];
      // A request that cannot be served (a broken document) goes as if it were stale.
      const fresh = (p: Entry<PendingRequest>) => isPendingRequest(p.value) && Date.now() - Date.parse(p.value.created) < PENDING_FRESH_MS;
      // Serving other processes' requests needs the commit to be one transaction: applied one write
      // at a time, a commit that serves others has more writes to fail and undo part-way, and
      // another process may be committing on the node meanwhile. A resident agent's own waiting
      // ADDs are served on either datastore: its turn makes it the node's one allocator, so its
      // commit rarely loses the block, and losing it undoes the served handles like its own.
      if (store.transactional)
        plan.serve(
          pending.filter((p) => p.key !== pendingKey && fresh(p)),
          options.pools ?? [],
        );
      const servedWaiting =
        serveWaiting && options.waiting ? plan.serveWaiting(options.waiting.waiting(node, SERVE_AT_MOST), options.pools ?? []) : [];
      // Requests of ADDs that died waiting go with this commit.
      const stale = pending.filter((p) => p.key !== pendingKey && !fresh(p)).slice(0, SERVE_AT_MOST);
      const own = pending.find((p) => p.key === pendingKey);
      const companionWrites = await Promise.all(
        companions.map(async (companion) => {
          const current =
            first.companions?.[companion.key] !== undefined
              ? (first.companions[companion.key] ?? undefined)
              : await store.get(companion.key);
          return companionWrite(
            companion,
            plan.allocations.map((a) => a.address),
            current,
          );
        }),
      );
      // The served ADDs' own documents too, where they said what they would write: each is then
      // done when the commit holds, with no write of its own after it.
      const servedCompanionWrites = servedWaiting.flatMap(
        ({ add, allocations }) => add.companionWrites?.(allocations.map((a) => a.address)) ?? [],
      );
      // The blocks last: a datastore without transactions applies the writes in this order, and a
      // block is the write most likely to lose a race. Losing it then undoes only writes nobody
      // else touches (this handle, this pod's endpoint), and a crash before it leaves a handle
      // without addresses, which DEL and GC clean, never an address without a handle.
      const isBlock = (w: Write) => isBlockKey(w.key);
      const writes: Write[] = [
        ...plan.handleWrites(handleEntry),
        ...plan.writes.filter((w) => !isBlock(w)),
        ...plan.laterWrites,
        ...[own, ...stale].flatMap((p) => (p ? [{ key: p.key, remove: true as const, revision: p.revision }] : [])),
        ...companionWrites,
        ...servedCompanionWrites,
        ...plan.writes.filter(isBlock),
      ];
      if (writes.length === 0) return plan.allocations;
      // First: without transactions, a failed condition then undoes nothing (or, sent at once with
      // the writes before the block over netplug-node's spare connections, only this ADD's own).
      if (precondition) writes.unshift(unchangedSinceRead(precondition));
      const assumed = assumptions.length > 0;
      const assumedBefore = assumptions;
      writes.unshift(...assumptions);
      assumptions = [];
      const base: Read[] = [
        ...firstReads(handle, node, families, companionKeys),
        ...plan.blocksRead.map((cidr) => ({ get: keys.block(cidr) })),
        { list: keys.pending(node) },
      ];
      // A failed commit on known facts reads them too: if they still hold, only this attempt's own
      // state was stale, and the next attempt goes on from what the failure returned.
      const assumedReads: Read[] = assumedBefore.map((c) => ({ get: c.key }));
      const refresh: Read[] = [...base, ...(precondition ? [{ get: precondition.key }] : []), ...assumedReads];
      // Only a fresh allocation of any addresses can be served by someone else.
      const wait = store.transactional && !assumed && !waiting && !handleEntry && requests.every((r) => 'family' in r);
      const waitingRequest: PendingRequest = {
        handle,
        attributes: request.attributes,
        requests: requests.flatMap((r) => ('family' in r ? [{ family: r.family, pools: r.pools.map((p) => p.name) }] : [])),
        created: new Date().toISOString(),
      };
      prefer = plan.allocations.map((a) => a.address);
      const committing = store.commitElseRead(writes, refresh, wait ? [{ key: pendingKey, value: waitingRequest }] : []);
      options.planned?.(plan.allocations);
      const outcome = await committing.catch((err: unknown) => {
        // A served ADD's own document refused (not a conflict, which returns): that must fail only
        // that ADD, so the commit goes again without serving anyone. Not when the datastore is away.
        if (servedCompanionWrites.length === 0 || err instanceof StoreUnavailableError || err instanceof KubeUnavailableError) throw err;
        return undefined;
      });
      if (outcome === undefined) {
        serveWaiting = false;
        for (const { add } of servedWaiting) options.waiting?.withdraw(add);
        return undefined;
      }
      if (outcome.committed) {
        waiting = false;
        options.committed?.(writes, outcome.revisions);
        options.waiting?.served(
          node,
          writes.flatMap((w) => (w.key.startsWith(keys.handles) && 'create' in w ? [w.key.slice(keys.handles.length)] : [])),
          servedWaiting.map(({ add, handle: write, allocations }) => ({
            add,
            served: {
              handle: { key: write.key, value: write.create, revision: outcome.revisions[write.key] ?? '' },
              allocations,
              companionsWritten: add.companionWrites !== undefined,
            },
          })),
        );
        return plan.allocations;
      }
      waiting ||= wait;
      // A waiting ADD served may be what failed it (its handle exists after all): serve none
      // again, and those tried allocate in their own turns, where a bad one fails only itself.
      if (servedWaiting.length > 0) {
        serveWaiting = false;
        for (const { add } of servedWaiting) options.waiting?.withdraw(add);
      }
      const results = outcome.results.slice(0, base.length);
      if (precondition) {
        const entry = outcome.results[base.length] as Entry<unknown> | undefined;
        precondition.check(entry);
        precondition = { ...precondition, entry };
      }
      if (assumed && !stillHolds(assumedBefore, outcome.results.slice(refresh.length - assumedReads.length)))
        throw new StaleFactsError(`allocating addresses for ${handle}: what was known of node "${node}" changed`);
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
    if (waiting) await withdrawPendingRequest(store, node, handle).catch(() => undefined);
  }
}

/** Whether each condition-only write holds, given its key's entry as read now (undefined: absent). */
const stillHolds = (conditions: readonly Write[], entries: readonly unknown[]): boolean =>
  conditions.every((c, i) => {
    const entry = entries[i] as Entry<unknown> | undefined;
    return 'unchanged' in c ? entry?.revision === c.unchanged : 'absent' in c ? entry === undefined : true;
  });

const unchangedSinceRead = ({ key, entry }: Precondition): Write => (entry ? { key, unchanged: entry.revision } : { key, absent: true });
