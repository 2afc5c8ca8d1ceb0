// netplugctl pool update NAME: enable or disable a pool, change its node selector, NAT and
// encapsulation. The CIDR and block size stay: blocks already cut from the pool depend on them.
// Read, change, compare-and-swap, and on a conflict read again and re-apply only the flags given:
// a concurrent writer's change to another field is never lost.
import { parsePrefix } from '../net/cidr.ts';
import { ENCAPSULATION_MODES, type EncapsulationMode, type PoolSpec } from '../model/ip-pool.ts';
import { keys } from '../model/keys.ts';
import { checkedOrAbsent, checkedPool } from '../model/checked-documents.ts';
import { parseSelector, SelectorError } from '../selectors/parse.ts';
import { retryOnConflict, type Store } from '../store/store.ts';
import { refused, UsageError } from './usage.ts';

export interface PoolUpdateOptions {
  disable?: boolean;
  enable?: boolean;
  'node-selector'?: string;
  'nat-outgoing'?: string;
  'ipip-mode'?: string;
  'vxlan-mode'?: string;
}

/** The fields the flags set, checked before anything is read. */
export function poolChanges(options: PoolUpdateOptions): Partial<PoolSpec> {
  if (options.disable && options.enable) throw new UsageError('pool update takes --disable or --enable, not both');
  const changes: Partial<PoolSpec> = {};
  if (options.disable || options.enable) changes.disabled = options.disable === true;
  const selector = options['node-selector'];
  if (selector !== undefined) {
    try {
      parseSelector(selector);
    } catch (err) {
      if (err instanceof SelectorError) throw new UsageError(`--node-selector: ${err.message}`);
      throw err;
    }
    changes.nodeSelector = selector;
  }
  const nat = options['nat-outgoing'];
  if (nat !== undefined) {
    if (nat !== 'true' && nat !== 'false') throw new UsageError(`--nat-outgoing "${nat}" must be true or false`);
    changes.natOutgoing = nat === 'true';
  }
  for (const [flag, field] of [
    ['ipip-mode', 'ipipMode'],
    ['vxlan-mode', 'vxlanMode'],
  ] as const) {
    const value = options[flag];
    if (value === undefined) continue;
    if (!ENCAPSULATION_MODES.includes(value as EncapsulationMode))
      throw new UsageError(`--${flag} "${value}" must be one of ${ENCAPSULATION_MODES.join(', ')}`);
    changes[field] = value as EncapsulationMode;
  }
  if (changes.ipipMode && changes.ipipMode !== 'Never' && changes.vxlanMode && changes.vxlanMode !== 'Never')
    throw new UsageError('--ipip-mode and --vxlan-mode cannot both be enabled on one pool');
  if (Object.keys(changes).length === 0)
    throw new UsageError(
      'pool update needs at least one of --disable, --enable, --node-selector, --nat-outgoing, --ipip-mode, --vxlan-mode',
    );
  return changes;
}

export async function updatePool(store: Store, name: string, options: PoolUpdateOptions): Promise<string> {
  const changes = poolChanges(options);
  const outcome = await retryOnConflict(`updating pool "${name}"`, async () => {
    const entry = checkedOrAbsent(checkedPool, await store.get(keys.pool(name)));
    if (!entry) throw refused(`pool "${name}" does not exist`);
    const before = entry.value.spec;
    const spec: PoolSpec = { ...before, ...changes };
    if (spec.ipipMode !== 'Never' && spec.vxlanMode !== 'Never') {
      const [set, other] = changes.ipipMode ? ['ipip', 'vxlan'] : ['vxlan', 'ipip'];
      throw refused(
        `pool "${name}" has ${other} mode ${other === 'ipip' ? spec.ipipMode : spec.vxlanMode}; --${set}-mode ${
          set === 'ipip' ? spec.ipipMode : spec.vxlanMode
        } would enable both (add --${other}-mode Never)`,
      );
    }
    if (spec.ipipMode !== 'Never' && parsePrefix(spec.cidr)?.family === 6)
      throw refused(`pool "${name}" is IPv6; --ipip-mode is for IPv4 pools only`);
    const changed = (Object.keys(changes) as (keyof PoolSpec)[]).filter((field) => before[field] !== spec[field]);
    if (changed.length === 0) return { changed };
    const committed = await store.commit([{ key: entry.key, update: { ...entry.value, spec }, revision: entry.revision }]);
    return committed ? { changed, spec } : undefined;
  });
  if (!outcome.spec) return `pool "${name}" unchanged\n`;
  const spec = outcome.spec;
  const shown = outcome.changed.map((field) =>
    field === 'disabled' ? (spec.disabled ? 'disabled (no new addresses; those allocated stay)' : 'enabled') : `${field} ${spec[field]}`,
  );
  return `pool "${name}" updated: ${shown.join(', ')}\n`;
}
