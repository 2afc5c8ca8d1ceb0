// natOutgoing: traffic from a natOutgoing pool's pods to destinations outside every pool leaves
// the node with the node's address (masquerade), IPv4 and IPv6 alike. The rules are netplug's
// nftables table's "nat" part: a nat chain at postrouting, priority srcnat + 10, where
// destinations in any pool return (pod to pod keeps its source) and sources in an enabled
// natOutgoing pool are masqueraded. No pool asking means no chain.
//
// The previous release kept these rules in iptables (chain NETPLUG-NAT-OUTGOING of the nat
// table, jumped to from the top of POSTROUTING). Once the table holds the masquerade, that chain
// and its jump are removed (over netlink): masquerading has no gap while a node upgrades.
import type { Pool } from '../../ipam/pools.ts';
import { formatPrefix } from '../../net/cidr.ts';
import type { NftComposer } from '../../dataplane/nft-composer.ts';
import { removeIptablesChain } from '../../dataplane/nftables.ts';
import { baseChain, match, PRIORITY, rule } from '../../nft/build.ts';
import type { Chain, Rule, TablePart } from '../../nft/model.ts';
import { renderRule } from '../../nft/render.ts';

/** The contributor name of this part of netplug's table. */
export const NAT_PART = 'nat';
/** The base chain of the part in `inet netplug`. */
const NAT_CHAIN = 'nat-outgoing';
/** The chain the previous release left in iptables' nat table. */
const LEGACY_CHAIN = 'NETPLUG-NAT-OUTGOING';

/** The chain's rules; empty when no enabled pool has natOutgoing. */
export function natOutgoingRuleSet(pools: readonly Pool[]): Rule[] {
  const masqueraded = pools.filter((pool) => pool.spec.natOutgoing && !pool.spec.disabled);
  if (masqueraded.length === 0) return [];
  const field = (pool: Pool, end: 'saddr' | 'daddr') => (pool.prefix.family === 4 ? `ip ${end}` : `ip6 ${end}`) as 'ip saddr';
  return [
    // Between pools (pod to pod, on this node or another) the source stays: every pool, even a disabled one, still holds pods.
    ...pools.map((pool) => rule([match(field(pool, 'daddr'), formatPrefix(pool.prefix))], 'return', `pool ${pool.name}`)),
    ...masqueraded.map((pool) =>
      rule([match(field(pool, 'saddr'), formatPrefix(pool.prefix))], undefined, `natOutgoing of pool ${pool.name}`, [{ masquerade: {} }]),
    ),
  ];
}

/** The chain's rules as `nft list` shows them. */
export function natOutgoingRules(pools: readonly Pool[]): string[] {
  return natOutgoingRuleSet(pools).map(renderRule);
}

/** The nat part of netplug's table: the chain, or nothing when no pool asks for it. */
export function natOutgoingPart(pools: readonly Pool[]): TablePart {
  const rules = natOutgoingRuleSet(pools);
  if (rules.length === 0) return {};
  return { chains: [baseChain(NAT_CHAIN, { type: 'nat', hook: 'postrouting', priority: PRIORITY.srcnat + 10 }, rules)] };
}

/**
 * Keeps the nat part of the table in step with the pools, and removes the previous release's
 * iptables chain once the table holds the part. One per agent: it remembers what it last wrote.
 */
export class NatOutgoing {
  readonly #tables: NftComposer;
  #last: string | undefined;
  #legacyGone = false;

  constructor(tables: NftComposer) {
    this.#tables = tables;
  }

  /**
   * Gives the table the pools' nat part, with `others` (the floating IPs' chains) beside it. Says
   * what changed: `written`, `removed` (nothing asks), `unchanged`, or `waiting` (the table waits
   * for another contributor's part; nothing written). Throws a one-line message when the kernel
   * refuses.
   */
  async sync(
    pools: readonly Pool[],
    others: readonly Chain[] = [],
  ): Promise<{ outcome: 'unchanged' | 'written' | 'removed' | 'waiting'; legacyRemovedFrom?: string[] }> {
    const chains = [...(natOutgoingPart(pools).chains ?? []), ...others];
    const part: TablePart = chains.length > 0 ? { chains } : {};
    const text = JSON.stringify(part);
    // Each sync also has the writer check the kernel's table (someone else's change is written over).
    const applied = await this.#tables.setPart(NAT_PART, part, { verify: true });
    if (applied === 'waiting') return { outcome: 'waiting' };
    const outcome = text === this.#last ? 'unchanged' : part.chains ? 'written' : this.#last === undefined ? 'unchanged' : 'removed';
    this.#last = text;
    if (this.#legacyGone) return { outcome };
    // The table masquerades now (or no pool asks): the old chain can go.
    const from = await removeIptablesChain('nat', LEGACY_CHAIN);
    this.#legacyGone = true;
    return from ? { outcome, legacyRemovedFrom: from } : { outcome };
  }
}
