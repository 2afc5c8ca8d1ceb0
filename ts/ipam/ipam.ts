// What the plugin flow needs from address management, whichever manager provides it.
import type { Result } from '../cni/result.ts';
import type { Write } from '../store/store.ts';
import type { Companion } from './assignment.ts';

export interface Ipam {
  /**
   * Allocates the workload's addresses (idempotent for the same attachment where possible). A
   * manager on the datastore commits `companions` (the workload endpoint) in the same transaction.
   */
  add(companions?: readonly Companion[], overrides?: AddressOverrides, hooks?: AddHooks): Promise<Result>;
  /** Whether add() commits companions; otherwise the caller writes them. */
  readonly commitsCompanions: boolean;
  /**
   * Throws (error 7) when the manager's executable is missing: checked before the datastore is
   * asked anything, so that ADD reports what DEL would, whatever the datastore's state.
   */
  requirePlugin?(): void;
  /** Whether this attachment holds addresses already (only a manager whose ADD is idempotent says). */
  holdsAddresses?(): Promise<boolean>;
  /**
   * Releases them; releasing what is not allocated is success. Nothing is released before
   * `interfaceGone` settles (it may prepare meanwhile). A manager that commits may commit
   * `alongside` (the workload endpoint's removal) with the release, in one transaction.
   */
  del(interfaceGone?: Promise<unknown>, alongside?: Alongside): Promise<void>;
  /** Fails if the allocation made by ADD is missing. */
  check(): Promise<void>;
  /** Releases allocations of attachments not in the runtime's list of valid ones. */
  gc(): Promise<void>;
  /** Fails (error 50 or 51) if ADD could not be served now. */
  status(): Promise<void>;
}

/**
 * Writes the caller would have committed on its own, offered for the release's commit. Tried in the
 * release's first commit only: `committed` is called if they held; otherwise (nothing to release,
 * a condition of theirs or the release's failed) the caller commits them itself.
 */
export interface Alongside {
  writes: readonly Write[];
  committed(): void;
}

/** What a pod's annotations ask of the address manager (only netplug-ipam can honour them). */
export interface AddressOverrides {
  /** Pools per family, replacing the netconf's. */
  pools?: Partial<Record<4 | 6, string[]>>;
  /** Exactly these addresses. */
  ips?: string[];
}

/** What a caller of add() may do while the allocation is under way. */
export interface AddHooks {
  /**
   * The addresses (without prefix) the allocation is about to commit, told as its commit leaves;
   * a retry after a lost race may commit others. Only a manager that commits says.
   */
  planned?: (addresses: readonly string[]) => void;
}
