// The named sets of the policy part, shared by every rule that uses the same one and kept while
// one does: a selector's set follows its members (registered in the selector index with the set,
// unregistered with it), a named-port set its members' ports, a fixed list stays as built.
import type { Atom, Element, NftSet } from '../nft/model.ts';
import { PROTOCOL_NUMBERS } from '../model/policy.ts';
import { parseSelector } from '../selectors/parse.ts';
import { intervalText, type Family, type Interval } from './addresses.ts';
import type { NamedPort } from './endpoints.ts';
import { setName, type SetDescriptor } from './rules.ts';
import { memoized } from './memo.ts';
import type { SelectorIndex } from './selector-index.ts';
import { AddressElements, CountedElements, ElementJournal } from './sets.ts';

/** What an object gives the sets whose selectors match it. */
export interface Contribution {
  addresses: readonly { family: Family; interval: Interval }[];
  ports: readonly NamedPort[];
  /** A workload endpoint on this node (the only members of a `local` named-port set). */
  local?: true;
}

interface SetRecord {
  name: string;
  set: SetDescriptor;
  refs: number;
  addresses?: AddressElements;
  named?: CountedElements;
  fixed?: Element[];
  /** The set as the part gives it, kept while its elements stay (the table writer skips a set it gave before by identity). */
  nft?: NftSet;
}

/** A set's selector parsed (the sets of both families and the named-port sets of a selector read the same text). */
const parsedSetSelector = memoized((text) => parseSelector(text, { allowGlobal: true }));

const protocolNumberOf = (name: string): number | undefined => PROTOCOL_NUMBERS[name as keyof typeof PROTOCOL_NUMBERS];

export class SetRegistry {
  readonly journal = new ElementJournal();
  readonly #sets = new Map<string, SetRecord>();
  /** Selector text → the sets that follow its members. */
  readonly #bySelector = new Map<string, Set<SetRecord>>();
  readonly #index: SelectorIndex;
  readonly #contribution: (entity: string) => Contribution | undefined;
  readonly #structureChanged: () => void;

  constructor(index: SelectorIndex, contribution: (entity: string) => Contribution | undefined, structureChanged: () => void) {
    this.#index = index;
    this.#contribution = contribution;
    this.#structureChanged = structureChanged;
  }

  get size(): number {
    return this.#sets.size;
  }

  /** One more user of the set; returns its name. */
  use(set: SetDescriptor): string {
    const name = setName(set);
    const known = this.#sets.get(name);
    if (known) {
      known.refs++;
      return name;
    }
    const record: SetRecord = { name, set, refs: 1 };
    this.#sets.set(name, record);
    this.#structureChanged();
    const note = (text: string, element: Element, added: boolean) => {
      record.nft = undefined;
      this.journal.note(name, text, element, added);
    };
    if (set.kind === 'nets' || set.kind === 'ports') {
      record.fixed = set.elements;
      return name;
    }
    if (set.kind === 'selector') record.addresses = new AddressElements(set.family, note);
    else record.named = new CountedElements(note);
    const dependents = this.#bySelector.get(set.selector) ?? new Set<SetRecord>();
    this.#bySelector.set(set.selector, dependents);
    dependents.add(record);
    const members = this.#index.register(set.selector, parsedSetSelector(set.selector));
    for (const member of members) this.#apply(record, this.#contribution(member), true);
    this.journal.forget(name); // a new set is written whole with the part
    return name;
  }

  /** One user fewer; the set goes with its last. */
  release(name: string): void {
    const record = this.#sets.get(name);
    if (!record || --record.refs > 0) return;
    this.#sets.delete(name);
    this.journal.forget(name);
    this.#structureChanged();
    if (record.set.kind === 'selector' || record.set.kind === 'named-ports') {
      const dependents = this.#bySelector.get(record.set.selector);
      dependents?.delete(record);
      if (dependents?.size === 0) this.#bySelector.delete(record.set.selector);
      this.#index.unregister(record.set.selector);
    }
  }

  /** A member joined or left a selector. */
  membershipChanged(selector: string, entity: string, added: boolean): void {
    const dependents = this.#bySelector.get(selector);
    if (!dependents) return;
    const contribution = this.#contribution(entity);
    for (const record of dependents) this.#apply(record, contribution, added);
  }

  /** What `entity` gives (its addresses or ports changed): taken out of or put into every set it is in. */
  contribute(entity: string, contribution: Contribution | undefined, added: boolean): void {
    for (const selector of this.#index.memberships(entity)) {
      for (const record of this.#bySelector.get(selector) ?? []) this.#apply(record, contribution, added);
    }
  }

  #apply(record: SetRecord, contribution: Contribution | undefined, added: boolean): void {
    if (!contribution) return;
    const { set } = record;
    if (set.kind === 'selector') {
      const elements = record.addresses as AddressElements;
      for (const { family, interval } of contribution.addresses) {
        if (family !== set.family) continue;
        if (added) elements.add(interval);
        else elements.remove(interval);
      }
      return;
    }
    if (set.kind !== 'named-ports' || (set.local && !contribution.local)) return;
    const elements = record.named as CountedElements;
    const each = (protocol: number, port: number) => {
      for (const { family, interval } of contribution.addresses) {
        if (family !== set.family || interval.start !== interval.end) continue;
        const element: Atom[] = [intervalText(family, interval), protocol, port];
        if (added) elements.add(element);
        else elements.remove(element);
      }
    };
    for (const port of contribution.ports) {
      if (!set.names.includes(port.name)) continue;
      const protocol = protocolNumberOf(port.protocol);
      if (protocol === undefined || (set.protocol !== undefined && protocol !== set.protocol)) continue;
      each(protocol, port.port);
    }
    if (set.ports && set.protocol !== undefined) for (const port of set.ports) each(set.protocol, port);
  }

  /** The sets as the part describes them, elements included. */
  nftSets(): NftSet[] {
    const out: NftSet[] = [];
    for (const record of this.#sets.values()) {
      record.nft ??= nftSetOf(record);
      out.push(record.nft);
    }
    return out.sort((a, b) => (a.name < b.name ? -1 : 1));
  }

  /** Whether the set exists (for explain and tests). */
  has(name: string): boolean {
    return this.#sets.has(name);
  }
}

function nftSetOf(record: SetRecord): NftSet {
  const { set } = record;
  const address = (family: Family): 'ipv4_addr' | 'ipv6_addr' => (family === 4 ? 'ipv4_addr' : 'ipv6_addr');
  switch (set.kind) {
    case 'selector':
    case 'nets':
      return {
        name: record.name,
        type: address(set.family),
        flags: ['interval'],
        elements: record.fixed ?? (record.addresses as AddressElements).elements(),
      };
    case 'ports':
      return { name: record.name, type: 'inet_service', flags: ['interval'], elements: record.fixed as Element[] };
    case 'named-ports':
      return {
        name: record.name,
        type: [address(set.family), 'inet_proto', 'inet_service'],
        elements: (record.named as CountedElements).elements(),
      };
  }
}
