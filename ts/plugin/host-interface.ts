// The name of the workload's host-side veth end: prefix + 11 hex digits of a SHA-1, the scheme the
// policy agent uses to derive it from a workload's identity (computed by the data plane).
import type { CniEnvironment } from '../cni/environment.ts';
import { CniError, ErrorCode, quote } from '../cni/errors.ts';
import { interfaceNameProblem } from '../cni/interface-name.ts';
import { hostInterfaceName as derive } from '../dataplane/index.ts';

const DEFAULT_PREFIX = 'cali';
/** IFNAMSIZ - 1: the kernel's longest interface name. */
const MAX_IFNAME_LENGTH = 15;
/**
 * The hash part never shrinks below the 11 hex digits the scheme has. Why 11: the policy agent
 * derives exactly prefix + 11 digits, so any other length names an interface it never finds; and
 * 44 bits keep names apart on a node (with 250 pods present, a new pod's name matches one of them
 * with odds of 250 / 2^44, about 1 in 7e10), where 8 digits would give 1 in 1.7e7 per ADD, which
 * a large cluster reaches. Cutting the name to 15 characters instead would shorten the hash
 * silently: with a 15-character prefix, every pod on the node would get the same interface.
 */
const HASH_DIGITS = 11;
const MAX_PREFIX_LENGTH = MAX_IFNAME_LENGTH - HASH_DIGITS;

/** The first entry of FELIX_INTERFACEPREFIX (as the reference reads it), else "cali". */
export function interfacePrefix(env: Readonly<Record<string, string | undefined>>): string {
  const prefix = env['FELIX_INTERFACEPREFIX']?.split(',')[0]?.trim() || DEFAULT_PREFIX;
  const length = Buffer.byteLength(prefix);
  const problem =
    length > MAX_PREFIX_LENGTH
      ? `is ${length} bytes long: host interface names are the prefix and ${HASH_DIGITS} hex digits in at most ${MAX_IFNAME_LENGTH} bytes, so the prefix may have at most ${MAX_PREFIX_LENGTH}`
      : interfaceNameProblem(prefix);
  if (problem) throw new CniError(ErrorCode.InvalidEnvironment, `FELIX_INTERFACEPREFIX's first entry ${quote(prefix)} ${problem}`);
  return prefix;
}

/**
 * A Kubernetes pod's identity is `<namespace>.<pod>`, from which the policy agent derives the same
 * name: every sandbox of the pod gets the same host interface, and a new one replaces the old.
 * Outside an orchestrator the identity is the attachment: container ID and interface. It is
 * hashed rather than cut (the reference takes the container ID's first 11 characters): IDs from
 * clients such as cnitool share a long prefix, and a second interface of one container would
 * otherwise take the first one's name, and replace its veth.
 */
export function hostInterfaceName(env: CniEnvironment): string {
  const { podNamespace, podName } = env.args;
  const identity = podNamespace && podName ? `${podNamespace}.${podName}` : `${env.containerId}/${env.ifname}`;
  return derive(interfacePrefix(env.raw), identity);
}
