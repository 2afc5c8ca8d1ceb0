// Where an allocation or release runs: in a resident agent's turn for the node (in memory), else,
// where the datastore has no transactions, under the host-wide lock file that separate plugin
// processes share. A waiting ADD may be served by another's commit before its turn comes.
import type { Store } from '../store/store.ts';
import type { Served, WaitingAdd, WaitingAdds } from './waiting-adds.ts';

/**
 * Runs `work` in `node`'s turn; `waited` says whether another allocation went first (so what was
 * read before is stale).
 */
export type IpamTurns = <T>(node: string, work: (waited: boolean) => Promise<T>) => Promise<T>;

/**
 * `work` in its turn (`inTurn`), unless another ADD's commit serves `waiting` first: then its
 * allocation, and its turn, when it comes, does nothing.
 */
export async function inTurnUnlessServed<T>(
  waiting: { adds: WaitingAdds; add: WaitingAdd } | undefined,
  inTurn: <R>(work: (waited: boolean) => Promise<R>) => Promise<R>,
  work: (waited: boolean) => Promise<T>,
): Promise<{ done: T } | { served: Served }> {
  if (!waiting) return { done: await inTurn(work) };
  const { adds, add } = waiting;
  const turn = inTurn(async (waited) => {
    if (add.served) return undefined;
    // From here this ADD allocates for itself: no other commit may serve it too.
    adds.withdraw(add);
    return { done: await work(waited) };
  });
  // Served, the turn later resolves with nothing; it never rejects then, as it does no work.
  turn.catch(() => undefined);
  const outcome = await Promise.race([turn, add.whenServed.then((served) => ({ served }))]);
  return outcome ?? { served: add.served as Served };
}

/** Where plugin processes on a node take turns with a datastore that has no transactions. */
export const IPAM_LOCK_FILE = '/var/run/netplug/ipam.lock';
/** How long to wait for the lock before going on without it (it only spares conflicts). */
const IPAM_LOCK_PATIENCE_MS = 10_000;

/**
 * `work` under the host-wide IPAM lock when the datastore has no transactions (Kubernetes): there
 * a burst of pods on one node would race for the node's block one write at a time, each loser
 * undoing its writes and reading again, which grows with the square of the burst. etcd needs no
 * lock: a loser's request is served by the next winner's transaction.
 */
export async function underHostLock<T>(store: Store, work: (waited: boolean) => Promise<T>): Promise<T> {
  if (store.transactional) return work(false);
  const { lockHost } = await import('../host/lock.ts');
  const lock = await lockHost(IPAM_LOCK_FILE, IPAM_LOCK_PATIENCE_MS);
  try {
    return await work(lock?.waited ?? true);
  } finally {
    lock?.release();
  }
}
