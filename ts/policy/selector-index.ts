// Selector → members, kept up to date as labelled objects (endpoints, network sets) come, change
// and go, without evaluating every selector on every change: each selector is filed under one
// label it requires (its anchor: a key and the values it allows, from requiredLabels; of those,
// the one fewest objects carry when it is registered), so an object is only tested against the
// selectors anchored on a label it carries, plus the few that require none (`all()`, `!has(x)`);
// and a new selector is only tested against the objects that carry its anchor.
import { matches } from '../selectors/evaluate.ts';
import { requiredLabels } from '../selectors/label-keys.ts';
import type { Labels, Selector } from '../selectors/syntax.ts';
import { ENDPOINT_LABELS } from '../model/policy.ts';

/** Called for every membership that changes after a selector was registered. */
export type MembershipListener = (selector: string, member: string, added: boolean) => void;

type Anchor = { key: string; values: ReadonlySet<string> | undefined } | 'nothing' | 'none';

interface Registered {
  selector: Selector;
  refs: number;
  members: Set<string>;
  anchor: Anchor;
}

interface Entity {
  labels: Labels;
  memberOf: Set<string>;
}

const EMPTY: ReadonlySet<string> = new Set();

export class SelectorIndex {
  readonly #listener: MembershipListener;
  readonly #entities = new Map<string, Entity>();
  /** Label key → value → the objects carrying it. */
  readonly #byLabel = new Map<string, Map<string, Set<string>>>();
  readonly #selectors = new Map<string, Registered>();
  /** Label key → value → the selectors anchored on exactly that label. */
  readonly #anchoredOnValue = new Map<string, Map<string, Set<string>>>();
  /** Label key → the selectors anchored on the key whatever its value. */
  readonly #anchoredOnKey = new Map<string, Set<string>>();
  readonly #unanchored = new Set<string>();
  /** Selector evaluations done, for the cost measurements. */
  evaluations = 0;

  constructor(listener: MembershipListener) {
    this.#listener = listener;
  }

  /** Registers one more user of `text` (the canonical text of `selector`); returns its members. */
  register(text: string, selector: Selector): ReadonlySet<string> {
    const known = this.#selectors.get(text);
    if (known) {
      known.refs++;
      return known.members;
    }
    const anchor = this.#anchorOf(selector);
    const entry: Registered = { selector, refs: 1, members: new Set(), anchor };
    this.#selectors.set(text, entry);
    this.#file(text, anchor, true);
    for (const key of this.#candidates(anchor)) {
      const entity = this.#entities.get(key) as Entity;
      this.evaluations++;
      if (matches(selector, entity.labels)) {
        entry.members.add(key);
        entity.memberOf.add(text);
      }
    }
    return entry.members;
  }

  /** One user fewer; the selector is forgotten with its last user (true then). */
  unregister(text: string): boolean {
    const entry = this.#selectors.get(text);
    if (!entry) return false;
    if (--entry.refs > 0) return false;
    this.#selectors.delete(text);
    this.#file(text, entry.anchor, false);
    for (const key of entry.members) this.#entities.get(key)?.memberOf.delete(text);
    return true;
  }

  members(text: string): ReadonlySet<string> {
    return this.#selectors.get(text)?.members ?? EMPTY;
  }

  /** The registered selectors `key` matches. */
  memberships(key: string): ReadonlySet<string> {
    return this.#entities.get(key)?.memberOf ?? EMPTY;
  }

  labels(key: string): Labels | undefined {
    return this.#entities.get(key)?.labels;
  }

  /** Adds an object or changes its labels; the listener hears of every membership that changed. */
  setEntity(key: string, labels: Labels): void {
    const entity = this.#entities.get(key);
    if (entity && sameLabels(entity.labels, labels)) return;
    if (entity) this.#index(key, entity.labels, false);
    const current = entity ?? { labels, memberOf: new Set<string>() };
    current.labels = labels;
    this.#entities.set(key, current);
    this.#index(key, labels, true);
    const was = new Set(current.memberOf);
    for (const text of this.#selectorsFor(labels)) {
      const entry = this.#selectors.get(text) as Registered;
      this.evaluations++;
      if (!matches(entry.selector, labels)) continue;
      if (!was.delete(text)) {
        current.memberOf.add(text);
        entry.members.add(key);
        this.#listener(text, key, true);
      }
    }
    for (const text of was) {
      current.memberOf.delete(text);
      this.#selectors.get(text)?.members.delete(key);
      this.#listener(text, key, false);
    }
  }

  removeEntity(key: string): void {
    const entity = this.#entities.get(key);
    if (!entity) return;
    this.#index(key, entity.labels, false);
    this.#entities.delete(key);
    for (const text of entity.memberOf) {
      this.#selectors.get(text)?.members.delete(key);
      this.#listener(text, key, false);
    }
  }

  #index(key: string, labels: Labels, add: boolean): void {
    for (const [label, value] of Object.entries(labels)) {
      let values = this.#byLabel.get(label);
      if (!values) {
        if (!add) continue;
        values = new Map();
        this.#byLabel.set(label, values);
      }
      const keys = values.get(value);
      if (add) {
        if (keys) keys.add(key);
        else values.set(value, new Set([key]));
      } else if (keys) {
        keys.delete(key);
        if (keys.size === 0) values.delete(value);
        if (values.size === 0) this.#byLabel.delete(label);
      }
    }
  }

  #file(text: string, anchor: Anchor, add: boolean): void {
    if (anchor === 'nothing') return;
    if (anchor === 'none') {
      if (add) this.#unanchored.add(text);
      else this.#unanchored.delete(text);
      return;
    }
    if (anchor.values === undefined) {
      const set = this.#anchoredOnKey.get(anchor.key) ?? new Set<string>();
      if (add) set.add(text);
      else set.delete(text);
      if (set.size > 0) this.#anchoredOnKey.set(anchor.key, set);
      else this.#anchoredOnKey.delete(anchor.key);
      return;
    }
    const byValue = this.#anchoredOnValue.get(anchor.key) ?? new Map<string, Set<string>>();
    for (const value of anchor.values) {
      const set = byValue.get(value) ?? new Set<string>();
      if (add) set.add(text);
      else set.delete(text);
      if (set.size > 0) byValue.set(value, set);
      else byValue.delete(value);
    }
    if (byValue.size > 0) this.#anchoredOnValue.set(anchor.key, byValue);
    else this.#anchoredOnValue.delete(anchor.key);
  }

  /** The anchor with the fewest objects under it now (most selectors keep that property as objects come and go). */
  #anchorOf(selector: Selector): Anchor {
    const anchors = anchorsOf(selector);
    if (typeof anchors === 'string') return anchors;
    let best: { anchor: Anchor; count: number } | undefined;
    for (const anchor of anchors) {
      const values = this.#byLabel.get(anchor.key);
      let count = 0;
      if (values && anchor.values === undefined) for (const keys of values.values()) count += keys.size;
      else if (values) for (const value of anchor.values ?? []) count += values.get(value)?.size ?? 0;
      if (!best || count < best.count) best = { anchor, count };
    }
    return (best as { anchor: Anchor }).anchor;
  }

  /** The objects that may match a selector with this anchor. */
  *#candidates(anchor: Anchor): Iterable<string> {
    if (anchor === 'nothing') return;
    if (anchor === 'none') {
      yield* this.#entities.keys();
      return;
    }
    const values = this.#byLabel.get(anchor.key);
    if (!values) return;
    if (anchor.values === undefined) {
      for (const keys of values.values()) yield* keys;
      return;
    }
    for (const value of anchor.values) yield* values.get(value) ?? [];
  }

  /** The selectors an object with these labels may match. */
  *#selectorsFor(labels: Labels): Iterable<string> {
    yield* this.#unanchored;
    for (const [label, value] of Object.entries(labels)) {
      yield* this.#anchoredOnKey.get(label) ?? [];
      yield* this.#anchoredOnValue.get(label)?.get(value) ?? [];
    }
  }
}

function sameLabels(a: Labels, b: Labels): boolean {
  const keys = Object.keys(a);
  if (keys.length !== Object.keys(b).length) return false;
  return keys.every((key) => Object.hasOwn(b, key) && a[key] === b[key]);
}

/**
 * The labels a selector could be filed under: per key it requires, the values it allows
 * (undefined: any); 'nothing' when it can match nothing, 'none' when it requires no label.
 */
function anchorsOf(selector: Selector): { key: string; values: ReadonlySet<string> | undefined }[] | 'nothing' | 'none' {
  const out: { key: string; values: ReadonlySet<string> | undefined }[] = [];
  for (const [key, values] of requiredLabels(selector)) {
    if (values !== undefined && values.size === 0) return 'nothing';
    if (key !== ENDPOINT_LABELS.orchestrator) out.push({ key, values });
  }
  return out.length > 0 ? out : 'none';
}
