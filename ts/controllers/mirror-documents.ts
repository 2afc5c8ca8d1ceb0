// What the policy and profile controllers share: a document of the datastore made to match what a
// Kubernetes object stands for (written only when its content differs, so a resync writes
// nothing), removed when the object is gone, and the sweep of documents whose object is gone.
// Every write is a compare-and-swap: a conflict fails the reconcile, which comes back after its
// backoff and reads afresh.
import { sameContent } from '../runtime/object-changes.ts';
import type { Log } from '../runtime/log.ts';
import type { Store } from '../store/store.ts';

/** The key a reconcile of every document (the orphan sweep) is queued under; no object's key has it. */
export const ORPHANS_KEY = '*';

/** How often every object and the orphan sweep are reconciled again (the reference's 5 minutes). */
export const RESYNC_MS = 5 * 60_000;

/** Makes `key` hold `value`; true when it wrote. */
export async function putDocument(store: Store, key: string, value: unknown): Promise<boolean> {
  const current = await store.get(key);
  if (current && sameContent(current.value, value)) return false;
  const written = current
    ? await store.commit([{ key, update: value, revision: current.revision }])
    : await store.commit([{ key, create: value }]);
  if (!written) throw new Error(`${key} changed while it was written`);
  return true;
}

/** Removes `key` if it exists; true when it removed it. */
export async function removeDocument(store: Store, key: string): Promise<boolean> {
  const current = await store.get(key);
  if (!current) return false;
  if (!(await store.commit([{ key, remove: true, revision: current.revision }]))) throw new Error(`${key} changed while it was removed`);
  return true;
}

/**
 * Removes the documents under `prefix` that `sourceOf` maps to an object that `cached` lacks and
 * `exists` (a fresh read) confirms gone; keys `sourceOf` maps to nothing are not this controller's.
 */
export async function removeOrphans(options: {
  store: Store;
  prefix: string;
  sourceOf: (key: string) => string | undefined;
  cached: (source: string) => boolean;
  exists: (source: string) => Promise<boolean>;
  what: string;
  log: Log;
}): Promise<void> {
  const { store, prefix, sourceOf, cached, exists, what, log } = options;
  for (const key of await store.listKeys(prefix)) {
    const source = sourceOf(key);
    if (source === undefined || cached(source) || (await exists(source))) continue;
    if (await removeDocument(store, key)) log.info(`removed ${what} ${key.slice(prefix.length)}: ${source} is gone`);
  }
}
