// The elements of the sets whose content follows the cluster: the addresses of what a selector
// matches (pod addresses and network-set CIDRs, made disjoint as an interval set must be), and
// the named ports of the endpoints a selector matches. Contributions are counted (two members may
// give the same address), and each change is told as the elements it adds and deletes, which the
// engine collects into the next element batch.
import type { Atom, Element } from '../nft/model.ts';
import { covers, intervalText, merged, type Family, type Interval } from './addresses.ts';

export type ElementListener = (text: string, element: Element, added: boolean) => void;

/**
 * An interval set of one family's addresses. Single addresses (pods) take a fast path: one
 * element each unless a wider interval covers it; wider intervals (network sets) are rare, and a
 * change to them recomputes the elements.
 */
export class AddressElements {
  readonly family: Family;
  readonly #singles = new Map<bigint, number>();
  readonly #wide = new Map<string, { interval: Interval; count: number }>();
  #wideMerged: Interval[] = [];
  readonly #current = new Set<string>();
  readonly #listener: ElementListener;

  constructor(family: Family, listener: ElementListener) {
    this.family = family;
    this.#listener = listener;
  }

  add(interval: Interval): void {
    if (interval.start === interval.end) {
      const count = this.#singles.get(interval.start) ?? 0;
      this.#singles.set(interval.start, count + 1);
      if (count === 0 && !covers(this.#wideMerged, interval.start)) this.#show(intervalText(this.family, interval), true);
      return;
    }
    const key = `${interval.start}-${interval.end}`;
    const known = this.#wide.get(key);
    if (known) known.count++;
    else {
      this.#wide.set(key, { interval, count: 1 });
      this.#recompute();
    }
  }

  remove(interval: Interval): void {
    if (interval.start === interval.end) {
      const count = this.#singles.get(interval.start);
      if (count === undefined) return;
      if (count > 1) {
        this.#singles.set(interval.start, count - 1);
        return;
      }
      this.#singles.delete(interval.start);
      if (!covers(this.#wideMerged, interval.start)) this.#show(intervalText(this.family, interval), false);
      return;
    }
    const key = `${interval.start}-${interval.end}`;
    const known = this.#wide.get(key);
    if (!known) return;
    if (--known.count > 0) return;
    this.#wide.delete(key);
    this.#recompute();
  }

  elements(): string[] {
    return [...this.#current];
  }

  #show(text: string, added: boolean): void {
    if (added) this.#current.add(text);
    else this.#current.delete(text);
    this.#listener(text, text, added);
  }

  #recompute(): void {
    this.#wideMerged = merged([...this.#wide.values()].map((w) => w.interval));
    const next = new Set(this.#wideMerged.map((interval) => intervalText(this.family, interval)));
    for (const value of this.#singles.keys())
      if (!covers(this.#wideMerged, value)) next.add(intervalText(this.family, { start: value, end: value }));
    for (const text of [...this.#current]) if (!next.has(text)) this.#show(text, false);
    for (const text of next) if (!this.#current.has(text)) this.#show(text, true);
  }
}

/** A set of exact elements (named ports: address . protocol . port), counted. */
export class CountedElements {
  readonly #counts = new Map<string, { element: Atom[]; count: number }>();
  readonly #listener: ElementListener;

  constructor(listener: ElementListener) {
    this.#listener = listener;
  }

  add(element: Atom[]): void {
    const text = element.join(' . ');
    const known = this.#counts.get(text);
    if (known) known.count++;
    else {
      this.#counts.set(text, { element, count: 1 });
      this.#listener(text, element, true);
    }
  }

  remove(element: Atom[]): void {
    const text = element.join(' . ');
    const known = this.#counts.get(text);
    if (!known) return;
    if (--known.count > 0) return;
    this.#counts.delete(text);
    this.#listener(text, known.element, false);
  }

  elements(): Atom[][] {
    return [...this.#counts.values()].map((v) => v.element);
  }
}

/** Element changes since the last batch, per set: an addition and a deletion of one element cancel. */
export class ElementJournal<E = Element> {
  readonly #sets = new Map<string, Map<string, { element: E; added: boolean }>>();

  note(set: string, text: string, element: E, added: boolean): void {
    const changes = this.#sets.get(set) ?? new Map<string, { element: E; added: boolean }>();
    this.#sets.set(set, changes);
    const before = changes.get(text);
    if (before && before.added !== added) changes.delete(text);
    else changes.set(text, { element, added });
  }

  forget(set: string): void {
    this.#sets.delete(set);
  }

  /** The changes, per set with any; the journal is emptied. */
  take(): { name: string; add: E[]; delete: E[] }[] {
    const out: { name: string; add: E[]; delete: E[] }[] = [];
    for (const [name, changes] of this.#sets) {
      const add: E[] = [];
      const del: E[] = [];
      for (const { element, added } of changes.values()) (added ? add : del).push(element);
      if (add.length > 0 || del.length > 0) out.push({ name, add, delete: del });
    }
    this.#sets.clear();
    return out;
  }

  clear(): void {
    this.#sets.clear();
  }
}
