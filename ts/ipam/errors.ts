// Address-management failures that a user can act on, each with its CNI error code.
import { ErrorCode } from '../cni/errors.ts';

export class IpamError extends Error {
  override readonly name = 'IpamError';
  readonly code: number;

  constructor(code: number, message: string) {
    super(message);
    this.code = code;
  }
}

/** A netconf or request names pools that cannot be used (error 7). */
export const poolError = (message: string) => new IpamError(ErrorCode.InvalidConfig, message);

/** Every usable pool is full. */
export const exhausted = (message: string) => new IpamError(ErrorCode.AddressesExhausted, message);

/** A requested address is taken by another workload. */
export const inUse = (message: string) => new IpamError(ErrorCode.AddressInUse, message);

/**
 * A datastore document netplug cannot use (error 7): it stays broken until an administrator
 * repairs or removes it, so "try again later" (11) would only have the runtime retry in vain.
 */
export const badDocument = (message: string) => new IpamError(ErrorCode.InvalidConfig, message);
