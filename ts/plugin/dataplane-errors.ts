// Data-plane failures as CNI errors: a namespace that is gone means the container is unknown (3),
// one that is not a usable namespace is error 8, a request the data plane refuses before touching
// the kernel (an MTU too small for IPv6, say) is invalid configuration (7), and anything else the
// kernel refused is 101.
import { CniError, ErrorCode } from '../cni/errors.ts';
import { DataplaneError } from '../dataplane/errors.ts';

export function toCniError(err: unknown): CniError {
  if (err instanceof CniError) return err;
  if (err instanceof DataplaneError) {
    const details = `${err.code} during: ${err.op}`;
    if (err.code === 'ENOENT' && err.op.startsWith('open network namespace')) {
      return new CniError(ErrorCode.UnknownContainer, err.message, details, { cause: err });
    }
    if (err.code === 'EINVAL' && /network namespace/.test(err.message)) {
      return new CniError(ErrorCode.InvalidNetns, err.message, details, { cause: err });
    }
    if (err.op === 'validate workload interface') {
      return new CniError(ErrorCode.InvalidConfig, err.message, details, { cause: err });
    }
    return new CniError(ErrorCode.KernelFailure, err.message, details, { cause: err });
  }
  const message = err instanceof Error ? err.message : String(err);
  return new CniError(ErrorCode.Internal, `internal error: ${message}`, undefined, { cause: err });
}
