// The description of an nftables table as netplug writes it (crates/netplug-nftables reads the
// same JSON): chains, named sets and maps, named counters, and rules in a closed vocabulary. The
// spelling follows what `nft list` prints, so a description reads like the ruleset an admin sees.
// Pure types: the policy compiler builds these, the data plane writes them, the renderer prints them.

export type Family = 'inet' | 'ip' | 'ip6';

export interface Table {
  family: Family;
  name: string;
  chains?: Chain[];
  sets?: NftSet[];
  maps?: NftMap[];
  /** Named counter objects (`counter name "x"` in rules). */
  counters?: string[];
}

export interface Chain {
  name: string;
  /** Present for a base chain (attached to a hook); absent for a regular chain (a jump target). */
  base?: BaseChain;
  rules?: Rule[];
}

type Hook = 'prerouting' | 'input' | 'forward' | 'output' | 'postrouting';

export interface BaseChain {
  type: 'filter' | 'nat' | 'route';
  hook: Hook;
  /** Numeric: filter 0, srcnat 100, dstnat -100, mangle -150, raw -300. */
  priority: number;
  /** accept when absent. */
  policy?: 'accept' | 'drop';
}

export type DataType = 'ipv4_addr' | 'ipv6_addr' | 'inet_proto' | 'inet_service' | 'ifname' | 'mark';

/** A value: a number (port, protocol, mark) or text (address, prefix `10.0.0.0/8`, range `1000-2000`, name). */
export type Atom = string | number;

/** A set element: one value, or one per field of a concatenation. */
export type Element = Atom | Atom[];

export interface NftSet {
  name: string;
  /** One data type, or a concatenation of two or more. */
  type: DataType | DataType[];
  /** interval: elements may be prefixes and ranges (which must not overlap). */
  flags?: 'interval'[];
  elements?: Element[];
}

/** A verdict map (`type ifname : verdict`), the dispatch of `iifname vmap @map`. */
export interface NftMap {
  name: string;
  type: DataType;
  elements?: MapElement[];
}

export interface MapElement {
  key: Element;
  verdict: MapVerdict;
}

export type Selector =
  | 'iifname'
  | 'oifname'
  | 'meta l4proto'
  | 'meta nfproto'
  | 'meta mark'
  | 'meta skuid'
  | 'ip saddr'
  | 'ip daddr'
  | 'ip6 saddr'
  | 'ip6 daddr'
  | 'th sport'
  | 'th dport'
  | 'icmp type'
  | 'icmp code'
  | 'icmpv6 type'
  | 'icmpv6 code'
  | 'ct state';

/** A named set to look the key up in (`@name`). */
export interface SetRef {
  set: string;
}

/**
 * `key op value`. The value is one value, a list (an anonymous set `{ a, b }`; for `ct state`
 * the states any of which matches) or a named set; a concatenated key takes a named set.
 * `iifname "cali*"` matches a prefix of the name. `mask` (meta mark only): compare `mark & mask`.
 */
export interface Match {
  key: Selector | Selector[];
  op?: '==' | '!=';
  mask?: Atom;
  value: Atom | Atom[] | SetRef;
}

export type Statement =
  | { counter: { name?: string } }
  | { limit: { rate: number; per: 'second' | 'minute' | 'hour' | 'day'; burst?: number } }
  | { log: { prefix?: string; group?: number; level?: LogLevel } }
  | { mark: { or: number } | { clear: number } }
  /** `ct mark set ct mark & ~clear | or`. */
  | { ctMark: { clear: number; or: number } }
  | { masquerade: { fullyRandom?: boolean } }
  /** `dnat ip to A` (`dnat ip6 to A`): the connection's destination becomes `to`. */
  | { dnat: { to: string } }
  /** `snat ip to A` (`snat ip6 to A`): the connection's source becomes `to`. */
  | { snat: { to: string } }
  | { notrack: Record<string, never> }
  | { reject: Record<string, never> };

type LogLevel = 'emerg' | 'alert' | 'crit' | 'err' | 'warn' | 'notice' | 'info' | 'debug';

type SimpleVerdict = 'accept' | 'drop' | 'return' | 'continue';
export type MapVerdict = SimpleVerdict | { jump: string } | { goto: string };
export type Verdict = MapVerdict | { vmap: { key: 'iifname' | 'oifname'; map: string } };

/** Every match holds (in order), then the statements run, then the verdict. */
export interface Rule {
  matches?: Match[];
  statements?: Statement[];
  verdict?: Verdict;
  /** Shown by `nft list` after the rule: which policy it belongs to (at most 127 bytes, no quote). */
  comment?: string;
}

/** Element changes to the named sets and maps of a table already written. */
export interface ElementChanges {
  sets?: { name: string; add?: Element[]; delete?: Element[] }[];
  /** `add` replaces the verdict of a key already there; `delete` takes keys. */
  maps?: { name: string; add?: MapElement[]; delete?: Element[] }[];
}

/**
 * A table's change from the description last written, as what changed (crates/netplug-nftables
 * delta.rs): chains given whole when added or rewritten, what is added and removed by name, and
 * element changes of the sets and maps that stay.
 */
export interface TableDelta {
  chains?: Chain[];
  deleteChains?: string[];
  sets?: NftSet[];
  deleteSets?: string[];
  maps?: NftMap[];
  deleteMaps?: string[];
  counters?: string[];
  deleteCounters?: string[];
  elements?: ElementChanges;
}

/** What one contributor puts in the table: the table is the union of every contributor's part. */
export interface TablePart {
  chains?: Chain[];
  sets?: NftSet[];
  maps?: NftMap[];
  counters?: string[];
}
