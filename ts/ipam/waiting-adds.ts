// ADDs queued for their node's turn in a resident agent (netplug-node). The ADD that holds the turn
// allocates for them too, in its own commit: a group commit, so a burst of pods on one node costs a
// few commits of the node's block instead of one each. An ADD that says what its own documents
// (its workload endpoint) would be has them written in that commit too, and is done when it holds;
// one that cannot (it has not read them) writes them after, outside the turn. This is the
// in-memory counterpart of the pending requests that separate plugin processes leave in the
// datastore (allocator.ts), and is served the same way (Plan.serve). The turn, not this queue,
// keeps two commits of one node apart.
import type { Entry, Write } from '../store/store.ts';
import { companionWrite, type AddressRequest, type Allocation, type Assignment, type Companion } from './assignment.ts';
import type { KnownState } from './known-state.ts';
import type { Handle, PendingRequest } from '../model/ipam-documents.ts';

/** What another ADD's commit allocated for a waiting one: its handle as written, and its addresses. */
export interface Served {
  handle: Entry<Handle>;
  allocations: Allocation[];
  /** The ADD's own documents went with the commit (WaitingAdd.companionWrites). */
  companionsWritten: boolean;
}

/** One ADD waiting for its node's turn, with what it asks for. */
export class WaitingAdd {
  readonly node: string;
  readonly request: PendingRequest;
  /** The ADD's own documents given its addresses, for the commit that serves it to write too. */
  readonly companionWrites: ((addresses: readonly string[]) => Write[]) | undefined;
  /** Resolves once another ADD's commit has allocated for this one; never rejects. */
  readonly whenServed: Promise<Served>;
  #served: Served | undefined;
  readonly #resolve: (served: Served) => void;

  constructor(node: string, request: PendingRequest, companionWrites?: (addresses: readonly string[]) => Write[]) {
    this.node = node;
    this.request = request;
    this.companionWrites = companionWrites;
    let resolve: (served: Served) => void = () => undefined;
    this.whenServed = new Promise((r) => {
      resolve = r;
    });
    this.#resolve = resolve;
  }

  get served(): Served | undefined {
    return this.#served;
  }

  /** @internal WaitingAdds.served() */
  serve(served: Served): void {
    this.#served = served;
    this.#resolve(served);
  }
}

export class WaitingAdds {
  readonly #byNode = new Map<string, Set<WaitingAdd>>();
  readonly #onServed: (count: number) => void;

  /** `onServed`: told how many ADDs each group commit served besides its own (metrics). */
  constructor(onServed: (count: number) => void = () => undefined) {
    this.#onServed = onServed;
  }

  /**
   * Queues an ADD of `node`: a commit of the node may serve it until it is withdrawn, and write
   * `companionWrites` for it.
   */
  wait(node: string, request: PendingRequest, companionWrites?: (addresses: readonly string[]) => Write[]): WaitingAdd {
    const add = new WaitingAdd(node, request, companionWrites);
    const waiting = this.#byNode.get(node) ?? new Set();
    waiting.add(add);
    this.#byNode.set(node, waiting);
    return add;
  }

  /** The ADD allocates for itself from here on (its turn came), or gave up. */
  withdraw(add: WaitingAdd): void {
    const waiting = this.#byNode.get(add.node);
    waiting?.delete(add);
    if (waiting?.size === 0) this.#byNode.delete(add.node);
  }

  /** The node's waiting ADDs, oldest first, at most `limit`. */
  waiting(node: string, limit: number): WaitingAdd[] {
    return [...(this.#byNode.get(node) ?? [])].slice(0, limit);
  }

  /**
   * A commit of `node` held that created `handles` and allocated for `served`: each served ADD
   * learns its addresses and leaves the queue. So does, unserved, any other waiting for one of
   * those handles (the same container's ADD again): its handle exists now, so serving it would
   * fail the commit that tried; in its own turn it finds its addresses.
   */
  served(node: string, handles: readonly string[], served: readonly { add: WaitingAdd; served: Served }[]): void {
    for (const { add, served: result } of served) {
      this.withdraw(add);
      add.serve(result);
    }
    const created = new Set(handles);
    for (const add of this.#byNode.get(node) ?? []) if (created.has(add.request.handle)) this.withdraw(add);
    if (served.length > 0) this.#onServed(served.length);
  }
}

/** An ADD's request as a waiting ADD states it, for another's commit to serve. */
export const pendingRequest = (request: Assignment, requests: readonly AddressRequest[]): PendingRequest => ({
  handle: request.handle,
  attributes: request.attributes,
  requests: requests.flatMap((r) => ('family' in r ? [{ family: r.family, pools: r.pools.map((p) => p.name) }] : [])),
  created: new Date().toISOString(),
});

/**
 * What a waiting ADD's commit writes for it besides its handle: `companions` as they would be
 * written given the addresses, where the ADD knows how each stands now (read, or known absent);
 * else nothing (undefined), and the ADD writes them itself once served.
 */
export function ownWrites(companions: readonly Companion[], known: KnownState): ((addresses: readonly string[]) => Write[]) | undefined {
  const current = known.companions;
  if (companions.length === 0 || !current || companions.some((c) => current[c.key] === undefined)) return undefined;
  return (addresses) => companions.map((c) => companionWrite(c, addresses, current[c.key] ?? undefined));
}
