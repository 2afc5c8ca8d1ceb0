// The name of the workload's host-side veth end: prefix + 11 hex digits of a SHA-1, the scheme the
// policy agent uses to derive it from a workload's identity (computed by the data plane).
import type { CniEnvironment } from '../cni/environment.ts';
import { hostInterfaceName as derive } from '../dataplane/index.ts';

const DEFAULT_PREFIX = 'cali';

/** The first entry of FELIX_INTERFACEPREFIX (as the reference reads it), else "cali". */
export function interfacePrefix(env: Readonly<Record<string, string | undefined>>): string {
  return env['FELIX_INTERFACEPREFIX']?.split(',')[0]?.trim() || DEFAULT_PREFIX;
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
