// The datastore as the address manager and the plugin see it: JSON documents under keys, each
// with a revision, changed only by compare-and-swap. The etcd datastore applies a commit in one
// transaction; a datastore without multi-object transactions applies its writes one by one in the
// order given, which callers choose so that a crash between two writes is safe.

import type { Entry } from '../model/entry.ts';
import { StoreError } from '../model/errors.ts';

export { API_VERSION, type Entry } from '../model/entry.ts';
export { StoreDocumentError, StoreError } from '../model/errors.ts';

export type Write =
  /** Create `key`; fails if it exists. */
  | { key: string; create: unknown }
  /** Replace `key`; fails unless it is still at `revision`. */
  | { key: string; update: unknown; revision: string }
  /** Delete `key`; fails unless it is still at `revision`. */
  | { key: string; remove: true; revision: string }
  /** Changes nothing; fails unless `key` is still at `unchanged` (a revision): a document the commit was decided on. */
  | { key: string; unchanged: string }
  /** Changes nothing; fails if `key` exists. */
  | { key: string; absent: true };

/** A write that only states a condition. */
export const changesNothing = (write: Write): write is { key: string; unchanged: string } | { key: string; absent: true } =>
  'unchanged' in write || 'absent' in write;

/** One read of a batch: a key, every entry under a prefix, or only the keys under a prefix. */
export type Read = { get: string } | { list: string } | { keys: string };

/** What a Read gives: the entry (or undefined), the entries, or the keys. */
export type ReadResult<R extends Read> = R extends { get: string }
  ? Entry<unknown> | undefined
  : R extends { list: string }
    ? Entry<unknown>[]
    : string[];

export interface Store {
  /** Where the data lives, for messages: `etcd at http://10.0.0.1:2379`. */
  readonly description: string;
  /**
   * Whether a commit is one transaction (etcd), or writes applied one by one and undone on a
   * failed condition (Kubernetes; there a condition-only write is checked by a read when its turn
   * comes, so a change landing after that read is not seen).
   */
  readonly transactional: boolean;
  get<T>(key: string): Promise<Entry<T> | undefined>;
  /** Every entry whose key starts with `prefix`. */
  list<T>(prefix: string): Promise<Entry<T>[]>;
  /** The keys under `prefix`, without values (cheap). */
  listKeys(prefix: string): Promise<string[]>;
  /** Several reads in one round trip, all at one revision. */
  read<const R extends readonly Read[]>(reads: R): Promise<{ -readonly [I in keyof R]: ReadResult<R[I]> }>;
  /** Starts connecting now, so that the connection is ready by the first request; failures surface there. */
  warmUp(): void;
  /** Applies all writes if every condition holds; `false` (nothing written) if any does not. */
  commit(writes: readonly Write[]): Promise<boolean>;
  /**
   * commit(), and when a condition fails, the reads instead, in the same round trip: a writer that
   * lost a race learns the state it lost to without asking again.
   */
  commitElseRead(
    writes: readonly Write[],
    reads: readonly Read[],
    /** Documents to put (unconditionally) when the commit fails, in the same round trip, before the reads. */
    otherwisePut?: readonly { key: string; value: unknown }[],
  ): Promise<Committed | { committed: false; results: unknown[] }>;
  close(): void;
  /**
   * Follows the entries under `prefix` until stopped: a resident program's view kept by the
   * datastore's watch instead of reads. Only where the datastore and its client can (etcd over gRPC).
   */
  follow?(prefix: string, events: FollowEvents): Following;
}

/** What follow() reports, in the datastore's order. */
export interface FollowEvents {
  /** Every entry under the prefix: first, and again whenever changes may have been missed. */
  listed(entries: Entry<unknown>[]): void;
  changed(entry: Entry<unknown>): void;
  removed(key: string): void;
  /** Following broke (the datastore unreachable, history compacted): it lists again shortly. */
  failed(err: Error): void;
}

export interface Following {
  stop(): void;
}

/** A commit that held: the new revision of every key it created or updated. */
export interface Committed {
  committed: true;
  revisions: Record<string, string>;
}

/** The datastore could not be reached or did not answer: try again later (CNI error 11). */
export class StoreUnavailableError extends Error {
  override readonly name = 'StoreUnavailableError';
}

/**
 * Repeats `attempt` while it reports a conflict (returns undefined), for up to `patienceMs`. Many
 * writers on one key (a burst of pods on one node, all on its block) would retry in lock step and
 * mostly collide again: each retry waits a random time whose bound doubles with every conflict
 * (up to 64 ms), so the writers spread out and the datastore is not flooded.
 */
export async function retryOnConflict<T>(
  what: string,
  attempt: (round: number) => Promise<T | undefined>,
  patienceMs = 30_000,
): Promise<T> {
  const start = Date.now();
  for (let round = 0; ; round++) {
    const result = await attempt(round);
    if (result !== undefined) return result;
    if (Date.now() - start > patienceMs) break;
    await new Promise((resolve) => setTimeout(resolve, Math.random() * Math.min(2 ** round, 64)));
  }
  throw new StoreError(`${what}: still conflicting with concurrent writers after ${patienceMs / 1000} s`);
}
