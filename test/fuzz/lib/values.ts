// Hostile values for structure-aware mutation: type confusions, edge numbers, odd strings, huge and
// deeply nested values, and JSON text no JavaScript value serialises to (duplicate keys, nesting
// deeper than JSON.stringify can go).
import type { Rng } from './prng.ts';

/** JSON text spliced in verbatim by `toJson`. */
export class RawJson {
  readonly text: string;
  constructor(text: string) {
    this.text = text;
  }
}

/** An object written with these entries in order, keys repeated as given. */
export class DuplicateKeys {
  readonly entries: readonly [string, unknown][];
  constructor(entries: readonly [string, unknown][]) {
    this.entries = entries;
  }
}

export const HUGE = 100_000;

export const EDGE_STRINGS: readonly string[] = [
  '',
  ' ',
  '\0',
  'a\0b',
  '\uD800',
  'x\uDFFFy',
  '\uD83D',
  '\uFEFF',
  '\u202Etxt',
  'é',
  '💥',
  'Ω≈ç√',
  '../../../../etc/passwd',
  '/',
  '.',
  '..',
  'a/b',
  'a b',
  '\n',
  '\t\r',
  ';',
  '=',
  ',,,',
  ':',
  '%s%n%x',
  // biome-ignore lint/suspicious/noTemplateCurlyInString: a shell-style placeholder is the point
  '${HOME}',
  '$(id)',
  '`id`',
  '0',
  '-1',
  '2147483648',
  '4294967296',
  '9007199254740993',
  '1e309',
  'NaN',
  'Infinity',
  '-0',
  '0x10',
  'true',
  'null',
  '[]',
  '{}',
  '__proto__',
  'constructor',
  'toString',
  'http://',
  'http://127.0.0.1:1',
  'https://[::1',
  '10.0.0.0/8',
  '::/0',
  '255.255.255.255',
  'ffff::1',
  '01.02.03.004',
  '1.2.3.4/33',
];

export const EDGE_NUMBERS: readonly number[] = [
  0,
  -0,
  -1,
  1,
  1.5,
  67,
  68,
  1279,
  1280,
  65535,
  65536,
  2 ** 31 - 1,
  2 ** 31,
  -(2 ** 31),
  2 ** 32,
  2 ** 53,
  2 ** 53 + 2,
  1e308,
  5e-324,
];

const EDGE_RAW = ['1e309', '-1e309', '1.0', '1e2', '-0.0', '00', `1${'0'.repeat(400)}`, '"\\ud800"', '"\\u0000"', '"\\udfff\\ud800"'];

/** A nesting `depth` deep, as JSON text. */
export function deepNesting(rng: Rng, depth: number): RawJson {
  const kind = rng.int(3);
  if (kind === 0) return new RawJson(`${'['.repeat(depth)}${']'.repeat(depth)}`);
  if (kind === 1) return new RawJson(`${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}`);
  return new RawJson(`${'[{"x":'.repeat(depth)}0${'}]'.repeat(depth)}`);
}

/** A string of any sort: an edge case, a huge one, random code units, or a mutation of `base`. */
export function hostileString(rng: Rng, base = 'x'): string {
  switch (rng.int(8)) {
    case 0:
    case 1:
      return rng.pick(EDGE_STRINGS);
    case 2:
      return rng.chance(0.03)
        ? rng.pick(['a', '\uD800', '9', '/']).repeat(HUGE)
        : base.repeat(Math.min(1 + rng.int(300), Math.ceil(HUGE / Math.max(1, base.length))));
    case 3: {
      let out = '';
      for (let i = rng.int(24); i > 0; i--) out += String.fromCharCode(rng.chance(0.7) ? 32 + rng.int(95) : rng.int(0x10000));
      return out;
    }
    case 4:
      return `${base}${rng.pick(EDGE_STRINGS)}`;
    case 5:
      return `${rng.pick(EDGE_STRINGS)}${base}`;
    case 6: {
      if (base.length === 0) return rng.pick(EDGE_STRINGS);
      const at = rng.int(base.length);
      return base.slice(0, at) + rng.pick(EDGE_STRINGS) + base.slice(at + 1);
    }
    default:
      return String(rng.pick(EDGE_NUMBERS));
  }
}

/** A value of any JSON type (and some no JSON.stringify makes), to replace a field with. */
export function hostileValue(rng: Rng, base?: unknown): unknown {
  switch (rng.int(12)) {
    case 0:
    case 1:
    case 2:
      return hostileString(rng, typeof base === 'string' ? base : String(base ?? 'x'));
    case 3:
      return rng.pick(EDGE_NUMBERS);
    case 4:
      return rng.pick([null, true, false]);
    case 5:
      return rng.pick([[], {}, [[]], [null], [{}], { '': '' }, [base], { value: base }]);
    case 6:
      return new RawJson(rng.pick(EDGE_RAW));
    case 7:
      return deepNesting(rng, rng.pick([20, 1000, 20_000, 50_000]));
    case 8:
      return rng.chance(0.04) ? Array.from({ length: 5_000 }, (_, i) => i) : Array.from({ length: 1 + rng.int(5) }, () => base);
    case 9:
      return rng.chance(0.04)
        ? Object.fromEntries(Array.from({ length: 2000 }, (_, i) => [`k${i}`, rng.pick(EDGE_STRINGS)]))
        : Object.fromEntries(Array.from({ length: 3 }, (_, i) => [`k${i}`, hostileString(rng)]));
    case 10:
      return typeof base === 'string' ? [base] : typeof base === 'number' ? String(base) : JSON.stringify(base ?? null);
    default:
      return base === undefined ? rng.pick(EDGE_STRINGS) : new DuplicateKeys([['v', base]]);
  }
}

/** JSON text for `value`, with RawJson spliced in and DuplicateKeys written as given. */
export function toJson(value: unknown): string {
  if (value instanceof RawJson) return value.text;
  if (value instanceof DuplicateKeys) return `{${value.entries.map(([k, v]) => `${JSON.stringify(k)}:${toJson(v)}`).join(',')}}`;
  if (Array.isArray(value)) return `[${value.map((item) => (item === undefined ? 'null' : toJson(item))).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const parts: string[] = [];
    for (const [k, v] of Object.entries(value)) if (v !== undefined) parts.push(`${JSON.stringify(k)}:${toJson(v)}`);
    return `{${parts.join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}
