// The change from one table description to the next as what changed (TableDelta), so that the
// writer checks and sends that alone. Objects the producer kept are unchanged by identity (the
// policy compiler gives an unchanged chain or set as the same object); others are compared by
// content, so a producer that rebuilds its part each time costs a comparison, not a write.
import type { Chain, Element, MapElement, NftMap, Table, TableDelta } from './model.ts';

/** The delta from `before` to `after`, or undefined when only a whole write can make it (a chain's hook or a set's type changed). */
export function tableDelta(before: Table, after: Table): TableDelta | undefined {
  const delta: Required<TableDelta> = {
    chains: [],
    deleteChains: [],
    sets: [],
    deleteSets: [],
    maps: [],
    deleteMaps: [],
    counters: [],
    deleteCounters: [],
    elements: { sets: [], maps: [] },
  };
  const oldChains = byName(before.chains);
  for (const chain of after.chains ?? []) {
    const old = oldChains.get(chain.name);
    oldChains.delete(chain.name);
    if (old === chain) continue;
    if (old === undefined) {
      delta.chains.push(chain);
      continue;
    }
    if (!same(old.base, chain.base)) return undefined;
    if (!sameRules(old, chain)) delta.chains.push(chain);
  }
  delta.deleteChains.push(...oldChains.keys());

  const oldSets = byName(before.sets);
  for (const set of after.sets ?? []) {
    const old = oldSets.get(set.name);
    oldSets.delete(set.name);
    if (old === set) continue;
    if (old === undefined) {
      delta.sets.push(set);
      continue;
    }
    if (!same(old.type, set.type) || !same(old.flags ?? [], set.flags ?? [])) return undefined;
    const change = elementChange(old.elements ?? [], set.elements ?? []);
    if (change) delta.elements.sets?.push({ name: set.name, ...change });
  }
  delta.deleteSets.push(...oldSets.keys());

  const oldMaps = byName(before.maps);
  for (const map of after.maps ?? []) {
    const old = oldMaps.get(map.name);
    oldMaps.delete(map.name);
    if (old === map) continue;
    if (old === undefined) {
      delta.maps.push(map);
      continue;
    }
    if (old.type !== map.type) return undefined;
    const change = mapChange(old, map);
    if (change) delta.elements.maps?.push({ name: map.name, ...change });
  }
  delta.deleteMaps.push(...oldMaps.keys());

  const oldCounters = new Set(before.counters ?? []);
  for (const counter of after.counters ?? []) if (!oldCounters.delete(counter)) delta.counters.push(counter);
  delta.deleteCounters.push(...oldCounters);

  // A name removed from one kind and added to another (a set become a map) is a whole write.
  const removed = new Set([...delta.deleteSets, ...delta.deleteMaps]);
  if ([...delta.sets, ...delta.maps].some((s) => removed.has(s.name))) return undefined;
  return compact(delta);
}

/** Whether the delta changes nothing. */
export function emptyDelta(delta: TableDelta): boolean {
  return Object.keys(delta).length === 0;
}

function byName<T extends { name: string }>(items: readonly T[] | undefined): Map<string, T> {
  return new Map((items ?? []).map((item) => [item.name, item]));
}

function same(a: unknown, b: unknown): boolean {
  return a === b || JSON.stringify(a) === JSON.stringify(b);
}

function sameRules(a: Chain, b: Chain): boolean {
  return a.rules === b.rules || JSON.stringify(a.rules ?? []) === JSON.stringify(b.rules ?? []);
}

const keyOf = (element: Element): string => (Array.isArray(element) ? element.join(' . ') : String(element));

function elementChange(before: readonly Element[], after: readonly Element[]): { add?: Element[]; delete?: Element[] } | undefined {
  if (before === after) return undefined;
  const old = new Map(before.map((e) => [keyOf(e), e]));
  const add: Element[] = [];
  for (const element of after) if (!old.delete(keyOf(element))) add.push(element);
  const del = [...old.values()];
  if (add.length === 0 && del.length === 0) return undefined;
  return { ...(add.length > 0 ? { add } : {}), ...(del.length > 0 ? { delete: del } : {}) };
}

function mapChange(before: NftMap, after: NftMap): { add?: MapElement[]; delete?: Element[] } | undefined {
  if (before.elements === after.elements) return undefined;
  const old = new Map((before.elements ?? []).map((e) => [keyOf(e.key), e]));
  const add: MapElement[] = [];
  for (const element of after.elements ?? []) {
    const had = old.get(keyOf(element.key));
    old.delete(keyOf(element.key));
    if (!had || !same(had.verdict, element.verdict)) add.push(element);
  }
  const del = [...old.values()].map((e) => e.key);
  if (add.length === 0 && del.length === 0) return undefined;
  return { ...(add.length > 0 ? { add } : {}), ...(del.length > 0 ? { delete: del } : {}) };
}

function compact(delta: Required<TableDelta>): TableDelta {
  const out: TableDelta = {};
  for (const key of ['chains', 'deleteChains', 'sets', 'deleteSets', 'maps', 'deleteMaps', 'counters', 'deleteCounters'] as const) {
    const list = delta[key] as unknown[];
    if (list.length > 0) (out as Record<string, unknown>)[key] = list;
  }
  const { sets = [], maps = [] } = delta.elements;
  if (sets.length > 0 || maps.length > 0) out.elements = { ...(sets.length > 0 ? { sets } : {}), ...(maps.length > 0 ? { maps } : {}) };
  return out;
}
