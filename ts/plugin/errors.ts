// Failures as CNI errors. Data plane: a namespace that is gone means the container is unknown
// (3), one that is not a usable namespace is 8, a request refused before the kernel saw it is
// invalid configuration (7), anything the kernel refused 101. Datastore: unreachable is "try again
// later" (11), or "not available" (50) for STATUS; settings that cannot work are 7; other refusals
// 100. The Kubernetes API likewise. Address management reports its own codes.
import type { Command } from '../cni/environment.ts';
import { CniError, ErrorCode } from '../cni/errors.ts';
import { DataplaneError } from '../dataplane/errors.ts';
import { IpamError } from '../ipam/errors.ts';
import { SelectorError } from '../selectors/parse.ts';
import { KubeError, KubeUnavailableError } from '../k8s/client.ts';
import { KubeSettingsError } from '../k8s/kubeconfig.ts';
import { EtcdSettingsError } from '../store/etcd/options.ts';
import { StoreDocumentError, StoreError, StoreUnavailableError } from '../store/store.ts';

export function toCniError(err: unknown, command?: Command): CniError {
  if (err instanceof CniError) return err;
  if (err instanceof DataplaneError) {
    const details = `${err.code} during: ${err.op}`;
    const cause = { cause: err };
    if (err.code === 'ENOENT' && err.op.startsWith('open network namespace'))
      return new CniError(ErrorCode.UnknownContainer, err.message, details, cause);
    if (err.code === 'EINVAL' && /network namespace/.test(err.message))
      return new CniError(ErrorCode.InvalidNetns, err.message, details, cause);
    if (err.op === 'validate workload interface') return new CniError(ErrorCode.InvalidConfig, err.message, details, cause);
    return new CniError(ErrorCode.KernelFailure, err.message, details, cause);
  }
  if (err instanceof IpamError) return new CniError(err.code, err.message, undefined, { cause: err });
  if (err instanceof StoreUnavailableError) {
    const code = command === 'STATUS' ? ErrorCode.PluginNotAvailable : ErrorCode.TryAgainLater;
    return new CniError(code, `the datastore is unreachable: ${err.message}`, undefined, { cause: err });
  }
  if (err instanceof EtcdSettingsError)
    return new CniError(ErrorCode.InvalidConfig, `netconf field "${err.field}": ${err.message}`, undefined, { cause: err });
  if (err instanceof StoreDocumentError) return new CniError(ErrorCode.InvalidConfig, err.message, undefined, { cause: err });
  if (err instanceof StoreError || err instanceof SelectorError)
    return new CniError(ErrorCode.Datastore, err.message, undefined, { cause: err });
  if (err instanceof KubeUnavailableError) {
    return new CniError(command === 'STATUS' ? ErrorCode.PluginNotAvailable : ErrorCode.TryAgainLater, err.message, undefined, {
      cause: err,
    });
  }
  if (err instanceof KubeSettingsError)
    return new CniError(ErrorCode.InvalidConfig, `netconf field "${err.field}": ${err.message}`, undefined, { cause: err });
  if (err instanceof KubeError) return new CniError(ErrorCode.Datastore, err.message, undefined, { cause: err });
  const message = err instanceof Error ? err.message : String(err);
  return new CniError(ErrorCode.Internal, `internal error: ${message}`, undefined, { cause: err });
}
