// What the plugin flow needs from address management, whichever manager provides it.
import type { Result } from '../cni/result.ts';

export interface Ipam {
  /** Allocates the workload's addresses (idempotent for the same attachment where possible). */
  add(): Promise<Result>;
  /** Releases them; releasing what is not allocated is success. */
  del(): Promise<void>;
  /** Fails if the allocation made by ADD is missing. */
  check(): Promise<void>;
  /** Releases allocations of attachments not in the runtime's list of valid ones. */
  gc(): Promise<void>;
  /** Fails (error 50 or 51) if ADD could not be served now. */
  status(): Promise<void>;
}
