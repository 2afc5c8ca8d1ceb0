// The name of the workload's host-side veth end. The policy agent derives the same name from the
// workload's identity, so the scheme is fixed: prefix + 11 characters.
import type { CniEnvironment } from '../cni/environment.ts';

const DEFAULT_PREFIX = 'cali';

/** The first entry of FELIX_INTERFACEPREFIX (as the reference reads it), else "cali". */
export function interfacePrefix(env: Readonly<Record<string, string | undefined>>): string {
  return env['FELIX_INTERFACEPREFIX']?.split(',')[0]?.trim() || DEFAULT_PREFIX;
}

/** Outside an orchestrator: the prefix and the first 11 characters of the container ID. */
export function hostInterfaceName(env: CniEnvironment): string {
  return `${interfacePrefix(env.raw)}${env.containerId.slice(0, 11)}`.slice(0, 15);
}
