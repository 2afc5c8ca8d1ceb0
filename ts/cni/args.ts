// CNI_ARGS: `K=V;K=V` pairs from the runtime (conventions of containernetworking/cni pkg/types).
import { parseIp } from '../net/cidr.ts';

import { CniError, ErrorCode, quote, shorten } from './errors.ts';

export interface CniArgs {
  /** A specific address requested for the workload (`IP=`). */
  ip?: string;
  /** Both present means the runtime speaks for a Kubernetes pod. */
  podNamespace?: string;
  podName?: string;
  podInfraContainerId?: string;
  podUid?: string;
}

const KNOWN = new Set(['IgnoreUnknown', 'IP', 'K8S_POD_NAMESPACE', 'K8S_POD_NAME', 'K8S_POD_INFRA_CONTAINER_ID', 'K8S_POD_UID']);

function invalid(msg: string): CniError {
  return new CniError(ErrorCode.InvalidEnvironment, `CNI_ARGS: ${msg}`);
}

/** Parses CNI_ARGS. Unknown keys are an error unless `IgnoreUnknown` is true, as in libcni. */
export function parseCniArgs(text: string | undefined): CniArgs {
  const pairs = new Map<string, string>();
  for (const pair of (text ?? '').split(';')) {
    if (pair === '') continue;
    const eq = pair.indexOf('=');
    if (eq <= 0 || pair.indexOf('=', eq + 1) !== -1) throw invalid(`${quote(pair)} is not a KEY=VALUE pair`);
    pairs.set(pair.slice(0, eq), pair.slice(eq + 1));
  }
  const ignoreUnknown = parseBool(pairs.get('IgnoreUnknown'));
  if (!ignoreUnknown) {
    const unknown = [...pairs.keys()].filter((key) => !KNOWN.has(key));
    if (unknown.length > 0) throw invalid(`unknown keys ${shorten(unknown.map(quote).join(', '))} (set IgnoreUnknown=1 to allow them)`);
  }
  const ip = pairs.get('IP');
  if (ip !== undefined && parseIp(ip) === undefined) throw invalid(`IP ${quote(ip)} is not an IP address`);
  const args: CniArgs = {};
  if (ip !== undefined) args.ip = ip;
  assign(args, 'podNamespace', pairs.get('K8S_POD_NAMESPACE'));
  assign(args, 'podName', pairs.get('K8S_POD_NAME'));
  assign(args, 'podInfraContainerId', pairs.get('K8S_POD_INFRA_CONTAINER_ID'));
  assign(args, 'podUid', pairs.get('K8S_POD_UID'));
  return args;
}

function assign(args: CniArgs, key: Exclude<keyof CniArgs, 'ip'>, value: string | undefined): void {
  if (value) args[key] = value;
}

function parseBool(value: string | undefined): boolean {
  if (value === undefined) return false;
  const lower = value.toLowerCase();
  if (['1', 't', 'true'].includes(lower)) return true;
  if (['0', 'f', 'false', ''].includes(lower)) return false;
  throw invalid(`IgnoreUnknown ${quote(value)} is not a boolean`);
}
