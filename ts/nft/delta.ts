// The change from one table description to the next as what changed (TableDelta), so that the
// writer checks and sends that alone. Objects the producer kept are unchanged by identity (the
// policy compiler gives an unchanged chain or set as the same object); others are compared by
// content, so a producer that rebuilds its part each time costs a comparison, not a write.
import type { Element, ElementChanges, Table, TableDelta } from './model.ts';

/** The delta from `before` to `after`, or undefined when only a whole write can make it (a chain's hook or a set's type changed). */
export function tableDelta(before: Table, after: Table): TableDelta | undefined {
  const setChanges: NonNullable<ElementChanges['sets']> = [];
  const mapChanges: NonNullable<ElementChanges['maps']> = [];
  const chains = byName(before.chains, after.chains, (old, chain) => {
    if (!same(old.base, chain.base)) return WHOLE;
    return same(old.rules ?? [], chain.rules ?? []) ? undefined : chain;
  });
  const sets = byName(before.sets, after.sets, (old, set) => {
    if (!same(old.type, set.type) || !same(old.flags ?? [], set.flags ?? [])) return WHOLE;
    const change = keyedChange(old.elements ?? [], set.elements ?? [], (e) => e, same);
    if (change) setChanges.push({ name: set.name, ...change });
  });
  const maps = byName(before.maps, after.maps, (old, map) => {
    if (old.type !== map.type) return WHOLE;
    const change = keyedChange(
      old.elements ?? [],
      map.elements ?? [],
      (e) => e.key,
      (a, b) => same(a.verdict, b.verdict),
    );
    if (change) mapChanges.push({ name: map.name, add: change.add, delete: change.delete?.map((e) => e.key) });
  });
  if (chains === WHOLE || sets === WHOLE || maps === WHOLE) return undefined;
  // A name removed from one kind and added to another (a set become a map) is a whole write.
  const removed = new Set([...sets.removed, ...maps.removed]);
  if ([...sets.added, ...maps.added].some((s) => removed.has(s.name))) return undefined;
  const counters = keyedChange(
    before.counters ?? [],
    after.counters ?? [],
    (c) => c,
    () => true,
  );
  const delta: TableDelta = {
    chains: [...chains.added, ...chains.changed],
    deleteChains: chains.removed,
    sets: sets.added,
    deleteSets: sets.removed,
    maps: maps.added,
    deleteMaps: maps.removed,
    counters: counters?.add ?? [],
    deleteCounters: counters?.delete ?? [],
    elements: { sets: setChanges, maps: mapChanges },
  };
  return compact(delta);
}

/** Whether the delta changes nothing. */
export function emptyDelta(delta: TableDelta): boolean {
  return Object.keys(delta).length === 0;
}

const WHOLE = Symbol('whole');

/**
 * Objects of `after` added, removed and changed against `before`, by name; `changed` is told of
 * each one whose object is not the one before, and gives what to rewrite (or WHOLE).
 */
function byName<T extends { name: string }>(
  before: readonly T[] | undefined,
  after: readonly T[] | undefined,
  changed: (old: T, now: T) => T | typeof WHOLE | undefined,
): { added: T[]; removed: string[]; changed: T[] } | typeof WHOLE {
  const old = new Map((before ?? []).map((item) => [item.name, item]));
  const out = { added: [] as T[], removed: [] as string[], changed: [] as T[] };
  for (const item of after ?? []) {
    const was = old.get(item.name);
    old.delete(item.name);
    if (was === item) continue;
    if (was === undefined) {
      out.added.push(item);
      continue;
    }
    const rewrite = changed(was, item);
    if (rewrite === WHOLE) return WHOLE;
    if (rewrite) out.changed.push(rewrite);
  }
  out.removed.push(...old.keys());
  return out;
}

function same(a: unknown, b: unknown): boolean {
  return a === b || JSON.stringify(a) === JSON.stringify(b);
}

const keyOf = (element: Element): string => (Array.isArray(element) ? element.join(' . ') : String(element));

/** What to add (new keys, or a value `sameValue` tells apart) and delete (keys gone) to turn `before` into `after`. */
function keyedChange<T>(
  before: readonly T[],
  after: readonly T[],
  key: (item: T) => Element,
  sameValue: (a: T, b: T) => boolean,
): { add?: T[]; delete?: T[] } | undefined {
  if (before === after) return undefined;
  const old = new Map(before.map((item) => [keyOf(key(item)), item]));
  const add: T[] = [];
  for (const item of after) {
    const k = keyOf(key(item));
    const had = old.get(k);
    old.delete(k);
    if (had === undefined || !sameValue(had, item)) add.push(item);
  }
  const del = [...old.values()];
  if (add.length === 0 && del.length === 0) return undefined;
  return { ...(add.length > 0 ? { add } : {}), ...(del.length > 0 ? { delete: del } : {}) };
}

function compact(delta: TableDelta): TableDelta {
  const out: TableDelta = {};
  for (const key of ['chains', 'deleteChains', 'sets', 'deleteSets', 'maps', 'deleteMaps', 'counters', 'deleteCounters'] as const) {
    const list = delta[key] as unknown[];
    if (list.length > 0) (out as Record<string, unknown>)[key] = list;
  }
  const { sets = [], maps = [] } = delta.elements ?? {};
  if (sets.length > 0 || maps.length > 0) out.elements = { ...(sets.length > 0 ? { sets } : {}), ...(maps.length > 0 ? { maps } : {}) };
  return out;
}
