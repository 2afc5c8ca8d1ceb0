// The datastore as the address manager and the plugin see it: JSON documents under keys, each
// with a revision, changed only by compare-and-swap. The etcd datastore applies a commit in one
// transaction; a datastore without multi-object transactions applies its writes one by one in the
// order given, which callers choose so that a crash between two writes is safe.

export interface Entry<T> {
  key: string;
  value: T;
  /** Opaque; changes with every write of the key. */
  revision: string;
}

export type Write =
  /** Create `key`; fails if it exists. */
  | { key: string; create: unknown }
  /** Replace `key`; fails unless it is still at `revision`. */
  | { key: string; update: unknown; revision: string }
  /** Delete `key`; fails unless it is still at `revision`. */
  | { key: string; remove: true; revision: string };

export interface Store {
  /** Where the data lives, for messages: `etcd at http://10.0.0.1:2379`. */
  readonly description: string;
  get<T>(key: string): Promise<Entry<T> | undefined>;
  /** Every entry whose key starts with `prefix`. */
  list<T>(prefix: string): Promise<Entry<T>[]>;
  /** The keys under `prefix`, without values (cheap). */
  listKeys(prefix: string): Promise<string[]>;
  /** Applies all writes if every condition holds; `false` (nothing written) if any does not. */
  commit(writes: readonly Write[]): Promise<boolean>;
  close(): void;
}

/** The datastore could not be reached or did not answer: try again later (CNI error 11). */
export class StoreUnavailableError extends Error {
  override readonly name = 'StoreUnavailableError';
}

/** The datastore answered, but refused the request. */
export class StoreError extends Error {
  override readonly name = 'StoreError';
}

/** Repeats `attempt` while it reports a conflict (returns undefined), up to `limit` times. */
export async function retryOnConflict<T>(what: string, attempt: (round: number) => Promise<T | undefined>, limit = 100): Promise<T> {
  for (let round = 0; round < limit; round++) {
    const result = await attempt(round);
    if (result !== undefined) return result;
    // Many writers on one key: spread the retries so they stop colliding in lock step.
    if (round >= 3) await new Promise((resolve) => setTimeout(resolve, Math.random() * Math.min(2 ** (round - 3), 50)));
  }
  throw new StoreError(`${what}: still conflicting with concurrent writers after ${limit} attempts`);
}
