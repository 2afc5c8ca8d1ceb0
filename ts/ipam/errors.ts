// Address-management failures that a user can act on, each with its CNI error code.
import { ErrorCode } from '../cni/errors.ts';
import { IpamError } from '../model/errors.ts';

// Defined with the model, whose checks of documents read back report broken ones with them.
export { IpamError } from '../model/errors.ts';

/** A netconf or request names pools that cannot be used (error 7). */
export const poolError = (message: string) => new IpamError(ErrorCode.InvalidConfig, message);

/** Every usable pool is full. */
export const exhausted = (message: string) => new IpamError(ErrorCode.AddressesExhausted, message);

/** A requested address is taken by another workload. */
export const inUse = (message: string) => new IpamError(ErrorCode.AddressInUse, message);
