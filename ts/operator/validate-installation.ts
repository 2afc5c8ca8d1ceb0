// The Installation's rules (the specification's), checked after defaulting: every problem is
// reported with the field's path and value, so the Degraded condition says what to change.
import { formatPrefix, parsePrefix, type Prefix, within } from '../net/cidr.ts';
import { parseSelector, SelectorError } from '../selectors/parse.ts';
import type { InstallationSpec } from './installation.ts';

const NAME = /^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/;
const MIB = 1024 * 1024;
const UNITS: Record<string, number> = { '': 1, Ki: 1024, Mi: MIB, Gi: 1024 * MIB, Ti: 1024 ** 2 * MIB, k: 1e3, M: 1e6, G: 1e9, T: 1e12 };

/** Bytes of a Kubernetes quantity such as 100Mi; undefined if it is not one. */
export function quantityBytes(value: string | number): number | undefined {
  if (typeof value === 'number') return Number.isFinite(value) ? value : undefined;
  const match = /^(\d+(?:\.\d+)?)(Ki|Mi|Gi|Ti|k|M|G|T)?$/.exec(value.trim());
  if (!match) return undefined;
  return Number(match[1]) * (UNITS[match[2] ?? ''] ?? 1);
}

const show = (value: unknown) => JSON.stringify(value);

/** The problems of a defaulted spec, each naming its field; empty when it can be used. */
export function validateInstallation(spec: InstallationSpec, platformCidrs: readonly string[] = []): string[] {
  const problems: string[] = [];
  const bad = (field: string, value: unknown, rule: string) => problems.push(`${field} ${show(value)} ${rule}`);
  const { cni = {}, calicoNetwork: network = {}, logging = {} } = spec;
  if (cni.type !== 'Netplug') bad('spec.cni.type', cni.type, 'is not supported: netplug installs its own CNI plugin (Netplug)');
  const ipam = cni.ipam?.type;
  if (ipam !== 'Netplug' && ipam !== 'HostLocal') bad('spec.cni.ipam.type', ipam, 'must be Netplug or HostLocal');
  for (const field of ['binDir', 'confDir'] as const) {
    const path = cni[field];
    if (typeof path !== 'string' || !path.startsWith('/') || path.split('/').includes('..'))
      bad(`spec.cni.${field}`, path, 'must be an absolute host path without ".."');
  }
  if (cni.fastPath !== undefined && cni.fastPath !== 'Enabled' && cni.fastPath !== 'Disabled')
    bad('spec.cni.fastPath', cni.fastPath, 'must be Enabled or Disabled');
  const { mtu, linuxPolicySetupTimeoutSeconds: timeout } = network;
  if (mtu !== undefined && (!Number.isInteger(mtu) || (mtu !== 0 && (mtu < 68 || mtu > 65535))))
    bad('spec.calicoNetwork.mtu', mtu, 'must be 0 (auto) or from 68 to 65535');
  if (timeout !== undefined && (!Number.isInteger(timeout) || timeout < 0))
    bad('spec.calicoNetwork.linuxPolicySetupTimeoutSeconds', timeout, 'must be a whole number of seconds, 0 or more (0 does not wait)');
  for (const field of ['hostPorts', 'containerIPForwarding'] as const) {
    const value = network[field];
    if (value !== undefined && value !== 'Enabled' && value !== 'Disabled')
      bad(`spec.calicoNetwork.${field}`, value, 'must be Enabled or Disabled');
  }
  const { enforcement, endpointStatusPathPrefix: prefix } = spec.policy ?? {};
  if (enforcement !== undefined && enforcement !== 'Enabled' && enforcement !== 'Disabled')
    bad('spec.policy.enforcement', enforcement, 'must be Enabled or Disabled');
  if (prefix !== undefined && (typeof prefix !== 'string' || !prefix.startsWith('/') || prefix.split('/').includes('..')))
    bad('spec.policy.endpointStatusPathPrefix', prefix, 'must be an absolute host path without ".."');
  const log = logging.cni ?? {};
  if (log.logSeverity !== undefined && !['Error', 'Warning', 'Info', 'Debug'].includes(log.logSeverity))
    bad('spec.logging.cni.logSeverity', log.logSeverity, 'must be one of Error, Warning, Info, Debug');
  if (log.logFileMaxSize !== undefined) {
    const bytes = quantityBytes(log.logFileMaxSize);
    if (bytes === undefined || bytes < MIB)
      bad('spec.logging.cni.logFileMaxSize', log.logFileMaxSize, 'must be a quantity of at least 1Mi, such as 100Mi');
  }
  for (const field of ['logFileMaxAgeDays', 'logFileMaxCount'] as const) {
    const value = log[field];
    if (value !== undefined && (!Number.isInteger(value) || value <= 0))
      bad(`spec.logging.cni.${field}`, value, 'must be a whole number greater than 0');
  }
  problems.push(...poolProblems(spec, platformCidrs));
  return problems;
}

function poolProblems(spec: InstallationSpec, platformCidrs: readonly string[]): string[] {
  const problems: string[] = [];
  const pools = spec.calicoNetwork?.ipPools ?? [];
  const platform = platformCidrs.map((cidr) => parsePrefix(cidr)).filter((p): p is Prefix => p !== undefined);
  const seen: { name: string | undefined; prefix: Prefix; field: string }[] = [];
  for (const [i, pool] of pools.entries()) {
    const at = `spec.calicoNetwork.ipPools[${i}]`;
    const bad = (field: string, value: unknown, rule: string) => problems.push(`${at}.${field} ${show(value)} ${rule}`);
    const prefix = typeof pool.cidr === 'string' ? parsePrefix(pool.cidr) : undefined;
    if (!prefix) {
      bad('cidr', pool.cidr, 'is not a CIDR (such as 10.244.0.0/16 or fd00:10:244::/56)');
      continue;
    }
    if (!parsePrefix(pool.cidr as string, true)) {
      bad('cidr', pool.cidr, `has host bits set; did you mean ${formatPrefix(prefix)}?`);
      continue;
    }
    if (pool.name !== undefined && !NAME.test(pool.name))
      bad('name', pool.name, "must be lower-case letters, digits, '-' and '.', starting and ending with a letter or digit");
    const [least, most] = prefix.family === 4 ? [20, 32] : [116, 128];
    const { blockSize } = pool;
    if (blockSize !== undefined) {
      if (!Number.isInteger(blockSize) || blockSize < least || blockSize > most)
        bad('blockSize', blockSize, `must be from ${least} to ${most} for an IPv${prefix.family} pool`);
      else if (blockSize < prefix.length) bad('blockSize', blockSize, `is larger than the pool ${pool.cidr}`);
    }
    if (pool.natOutgoing !== undefined && pool.natOutgoing !== 'Enabled' && pool.natOutgoing !== 'Disabled')
      bad('natOutgoing', pool.natOutgoing, 'must be Enabled or Disabled');
    if (pool.nodeSelector !== undefined) {
      try {
        if (pool.nodeSelector.trim() === '') throw new SelectorError('is empty (all() selects every node)');
        parseSelector(pool.nodeSelector);
      } catch (err) {
        if (!(err instanceof SelectorError)) throw err;
        bad('nodeSelector', pool.nodeSelector, `is not a selector: ${err.message}`);
      }
    }
    const encapsulation = pool.encapsulation;
    if (prefix.family === 6 && encapsulation?.startsWith('IPIP')) bad('encapsulation', encapsulation, 'is for IPv4 pools only');
    if (spec.cni?.ipam?.type === 'HostLocal' && encapsulation?.startsWith('VXLAN'))
      bad('encapsulation', encapsulation, 'cannot be used with spec.cni.ipam.type HostLocal');
    const inFamily = platform.filter((p) => p.family === prefix.family);
    if (inFamily.length > 0 && !inFamily.some((p) => within(prefix, p)))
      bad('cidr', pool.cidr, `must lie within the cluster's pod CIDR (${inFamily.map(formatPrefix).join(', ')})`);
    for (const other of seen) {
      if (pool.name !== undefined && other.name === pool.name)
        bad('name', pool.name, `is also ${other.field}'s name; names must be unique`);
      if (other.prefix.family === prefix.family && (within(prefix, other.prefix) || within(other.prefix, prefix)))
        bad('cidr', pool.cidr, `overlaps ${other.field}.cidr ${formatPrefix(other.prefix)}`);
    }
    seen.push({ name: pool.name, prefix, field: at });
  }
  return problems;
}
