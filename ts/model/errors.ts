// How a document read back that netplug cannot use is reported. The checks that find one are pure
// and live with the model; the store and address management re-export these classes
// (ts/store/store.ts, ts/ipam/errors.ts), and callers tell them apart by class and name.
import { ErrorCode } from '../cni/errors.ts';

/** Address-management failures that a user can act on, each with its CNI error code. */
export class IpamError extends Error {
  override readonly name = 'IpamError';
  readonly code: number;

  constructor(code: number, message: string) {
    super(message);
    this.code = code;
  }
}

/**
 * A datastore document netplug cannot use (error 7): it stays broken until an administrator
 * repairs or removes it, so "try again later" (11) would only have the runtime retry in vain.
 */
export const badDocument = (message: string) => new IpamError(ErrorCode.InvalidConfig, message);

/** The datastore answered, but refused the request. */
export class StoreError extends Error {
  override readonly name: string = 'StoreError';
}

/** A stored document is not what any writer of netplug's writes: a repair, not a retry, fixes it. */
export class StoreDocumentError extends StoreError {
  override readonly name = 'StoreDocumentError';
}
