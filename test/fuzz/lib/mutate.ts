// Structure-aware mutation: take a valid document, change one to three places in it (replace a
// value with a hostile one, drop a field, add a known field with a hostile value, repeat a key),
// then sometimes damage the bytes (truncation, trailing garbage, a BOM, invalid UTF-8).
import type { Rng } from './prng.ts';
import { DuplicateKeys, hostileValue, RawJson, toJson } from './values.ts';

type Json = unknown;

/** Where a container keeps the DuplicateKeys that stands for it (a key no seed has). */
const DUP = '\u0000duplicate-keys';
type Container = Record<string, Json> | Json[];

const isContainer = (value: Json): value is Container =>
  value !== null && typeof value === 'object' && !(value instanceof DuplicateKeys) && !(value instanceof RawJson);

/** Every container in `root` with its keys, root first. */
function containers(root: Container): Container[] {
  const found: Container[] = [root];
  for (let i = 0; i < found.length; i++) {
    for (const child of Object.values(found[i] as Container)) if (isContainer(child)) found.push(child);
  }
  return found;
}

/** A deep copy of plain JSON (the seeds), so mutations never touch the seed. */
export const clone = <T>(value: T): T => structuredClone(value);

/** `fields`: names worth adding where they are missing (a schema's keys, anywhere in the tree). */
export function mutateValue<T extends Container>(rng: Rng, seed: T, fields: readonly string[] = []): T {
  const root = clone(seed);
  for (let round = 1 + rng.int(3); round > 0; round--) {
    const target = rng.pick(containers(root));
    const keys = Object.keys(target).filter((k) => k !== DUP);
    const key = keys.length > 0 ? rng.pick(keys) : undefined;
    const op = rng.int(10);
    if (Array.isArray(target)) {
      const index = key === undefined ? 0 : Number(key);
      if (op < 6) target[index] = hostileValue(rng, target[index]);
      else if (op < 8) target.splice(index, 1);
      else target.push(hostileValue(rng, target[index]));
    } else if (op < 6 && key !== undefined) {
      target[key] = hostileValue(rng, target[key]);
    } else if (op < 7 && key !== undefined) {
      delete target[key];
    } else if (op < 9 && fields.length > 0) {
      const field = rng.pick(fields);
      target[field] = hostileValue(rng, target[field]);
    } else if (key !== undefined) {
      // A repeated key: JSON.parse keeps the last; which one a parser sees is its business, but it
      // must see one of them and judge it.
      const value = target[key];
      const other = hostileValue(rng, value);
      const entries = Object.entries(target).filter(([k]) => k !== key);
      const pair: [string, unknown][] = rng.chance(0.5)
        ? [
            [key, other],
            [key, value],
          ]
        : [
            [key, value],
            [key, other],
          ];
      for (const k of Object.keys(target)) delete target[k];
      // Written through toJson as an object with the key twice.
      Object.assign(target, { [DUP]: new DuplicateKeys([...entries, ...pair]) });
    }
  }
  return root;
}

/** JSON text of a mutated value (objects standing for DuplicateKeys written as such). */
export function serialize(value: Json): string {
  return toJson(unwrapDuplicates(value));
}

function unwrapDuplicates(value: Json): Json {
  if (value instanceof DuplicateKeys) return new DuplicateKeys(value.entries.map(([k, v]) => [k, unwrapDuplicates(v)]));
  if (Array.isArray(value)) return value.map(unwrapDuplicates);
  if (isContainer(value)) {
    const dup = (value as Record<string, Json>)[DUP];
    if (dup instanceof DuplicateKeys) return unwrapDuplicates(dup);
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, unwrapDuplicates(v)]));
  }
  return value;
}

/** Damaged bytes of `text`, now and then (most cases keep the structure valid JSON). */
export function damageBytes(rng: Rng, text: string): Buffer {
  const bytes = Buffer.from(text, 'utf8');
  if (!rng.chance(0.12)) return bytes;
  switch (rng.int(6)) {
    case 0:
      return bytes.subarray(0, rng.int(bytes.length + 1));
    case 1:
      return Buffer.concat([bytes, Buffer.from(rng.pick(['x', '}', ' {}', '\0', '\n\n', ',']))]);
    case 2:
      return Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), bytes]);
    case 3: {
      const copy = Buffer.from(bytes);
      if (copy.length > 0) copy[rng.int(copy.length)] = rng.pick([0x80, 0xc0, 0xff, 0xfe, 0xed]);
      return copy;
    }
    case 4:
      return Buffer.alloc(0);
    default:
      return Buffer.from(rng.pick(['null', '[]', '"x"', '0', 'true', '[{}]', '{"cniVersion":', '{}']));
  }
}

/** One mutated document as bytes. */
export function mutatedBytes(rng: Rng, seed: Container, fields: readonly string[] = []): Buffer {
  return damageBytes(rng, serialize(mutateValue(rng, seed, fields)));
}

/**
 * `value` with every field (anywhere: nested, and each copy of a repeated key) replaced by
 * `change(key, value)`: how a test constrains what a mutated document may point at.
 */
export function mapFields(value: Json, change: (key: string, value: Json) => Json): Json {
  const entries = (pairs: [string, Json][]) => pairs.map(([k, v]): [string, Json] => [k, mapFields(change(k, v), change)]);
  if (value instanceof DuplicateKeys) return new DuplicateKeys(entries([...value.entries]));
  if (Array.isArray(value)) return value.map((item) => mapFields(item, change));
  if (isContainer(value)) {
    const dup = (value as Record<string, Json>)[DUP];
    if (dup instanceof DuplicateKeys) return mapFields(dup, change);
    return Object.fromEntries(entries(Object.entries(value)));
  }
  return value;
}
