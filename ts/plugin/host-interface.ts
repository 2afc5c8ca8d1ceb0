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
 * Outside an orchestrator the identity is the container ID. It is hashed rather than cut (the
 * reference takes its first 11 characters): IDs from clients such as cnitool share a long
 * prefix, and two workloads with one name would replace each other's veth.
 */
export function hostInterfaceName(env: CniEnvironment): string {
  return derive(interfacePrefix(env.raw), env.containerId);
}
