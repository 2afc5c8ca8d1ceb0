// Small builders of table descriptions, so that code producing rules reads like the rules:
// rule([match('ip saddr', '10.0.0.0/8'), match('th dport', [80, 443])], 'accept', 'policy ns/web').
import type { Atom, BaseChain, Chain, Family, Match, Rule, Selector, SetRef, Statement, Table, TablePart, Verdict } from './model.ts';

/** `key value`, `key { a, b }` or `key @set` (named set). */
export function match(key: Selector | Selector[], value: Atom | Atom[] | SetRef): Match {
  return { key, value };
}

/** `key != value`. */
export function notMatch(key: Selector | Selector[], value: Atom | Atom[] | SetRef): Match {
  return { key, op: '!=', value };
}

/** A named set reference (`@name`). */
export const inSet = (name: string): SetRef => ({ set: name });

export function rule(matches: Match[], verdict?: Verdict, comment?: string, statements?: Statement[]): Rule {
  return {
    ...(matches.length > 0 ? { matches } : {}),
    ...(statements && statements.length > 0 ? { statements } : {}),
    ...(verdict !== undefined ? { verdict } : {}),
    ...(comment !== undefined ? { comment } : {}),
  };
}

export const jump = (chain: string): Verdict => ({ jump: chain });

export function baseChain(name: string, base: BaseChain, rules: Rule[] = []): Chain {
  return { name, base, rules };
}

export function regularChain(name: string, rules: Rule[] = []): Chain {
  return { name, rules };
}

/** Named priorities of nft (`priority srcnat + 10` is 110). */
export const PRIORITY = { raw: -300, mangle: -150, dstnat: -100, filter: 0, security: 50, srcnat: 100 } as const;

/** The table made of `parts` (in order); a name two parts both use is an error naming them. */
export function unionOf(family: Family, name: string, parts: ReadonlyMap<string, TablePart>): Table {
  const owners = new Map<string, string>();
  const claim = (kind: string, what: string, owner: string) => {
    const key = `${kind} ${what}`;
    const other = owners.get(key);
    if (other !== undefined && other !== owner)
      throw new Error(`table ${family} ${name}: ${kind} "${what}" is both ${other}'s and ${owner}'s`);
    if (other === owner) throw new Error(`table ${family} ${name}: ${owner} describes ${kind} "${what}" twice`);
    owners.set(key, owner);
  };
  const table: Required<Table> = { family, name, chains: [], sets: [], maps: [], counters: [] };
  for (const [owner, part] of parts) {
    for (const chain of part.chains ?? []) {
      claim('chain', chain.name, owner);
      table.chains.push(chain);
    }
    // Sets and maps share one namespace in nf_tables.
    for (const set of part.sets ?? []) {
      claim('set or map', set.name, owner);
      table.sets.push(set);
    }
    for (const map of part.maps ?? []) {
      claim('set or map', map.name, owner);
      table.maps.push(map);
    }
    for (const counter of part.counters ?? []) {
      claim('counter', counter, owner);
      table.counters.push(counter);
    }
  }
  return table;
}
