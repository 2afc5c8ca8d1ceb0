// IPv4 and IPv6 addresses as BigInt, for the block arithmetic of address management. Our own (some
// 100 lines) rather than a library: it is all the allocator needs, and it is on every pod's path,
// where node:net's isIP costs milliseconds (its IPv6 regular expression is compiled on first use).

export type Family = 4 | 6;

export interface Prefix {
  family: Family;
  /** The network address. */
  base: bigint;
  length: number;
}

export const widthOf = (family: Family): number => (family === 4 ? 32 : 128);

/** An address in the forms node:net's isIP accepts (dotted quad without leading zeros; RFC 4291 text), but no zone (%eth0). */
export function parseIp(text: string): { family: Family; value: bigint } | undefined {
  if (!text.includes(':')) {
    const value = parseV4(text);
    return value === undefined ? undefined : { family: 4, value };
  }
  const value = parseV6(text);
  return value === undefined ? undefined : { family: 6, value };
}

function parseV4(text: string): bigint | undefined {
  const parts = text.split('.');
  if (parts.length !== 4) return undefined;
  let value = 0n;
  for (const part of parts) {
    if (part.length === 0 || part.length > 3 || (part.length > 1 && part[0] === '0')) return undefined;
    let octet = 0;
    for (let i = 0; i < part.length; i++) {
      const digit = part.charCodeAt(i) - 48;
      if (digit < 0 || digit > 9) return undefined;
      octet = octet * 10 + digit;
    }
    if (octet > 255) return undefined;
    value = (value << 8n) | BigInt(octet);
  }
  return value;
}

const HEX_GROUP = (group: string) =>
  group.length >= 1 && group.length <= 4 && [...group].every((c) => '0123456789abcdefABCDEF'.includes(c));

function parseV6(text: string): bigint | undefined {
  const halves = text.split('::');
  if (halves.length > 2) return undefined;
  const [head, tail] = halves.map((half) => (half === '' ? [] : half.split(':'))) as [string[], string[] | undefined];
  const last = tail ?? head;
  // An embedded IPv4 tail (::ffff:1.2.3.4) stands for the last two groups.
  if (last.at(-1)?.includes('.')) {
    const dotted = parseV4(last.pop() as string);
    if (dotted === undefined) return undefined;
    last.push((dotted >> 16n).toString(16), (dotted & 0xffffn).toString(16));
  }
  const groups = [...head, ...(tail ?? [])];
  if (!groups.every(HEX_GROUP)) return undefined;
  if (tail === undefined ? groups.length !== 8 : groups.length > 7) return undefined;
  const all = tail === undefined ? head : [...head, ...Array<string>(8 - groups.length).fill('0'), ...tail];
  return all.reduce((acc, group) => (acc << 16n) | BigInt(Number.parseInt(group, 16)), 0n);
}

export function formatIp(family: Family, value: bigint): string {
  if (family === 4) return [24n, 16n, 8n, 0n].map((shift) => Number((value >> shift) & 0xffn)).join('.');
  const groups = Array.from({ length: 8 }, (_, i) => Number((value >> BigInt(112 - 16 * i)) & 0xffffn));
  // RFC 5952: compress the longest run (of two or more) of zero groups, the first if tied.
  let best = { start: -1, length: 0 };
  for (let i = 0; i < 8; ) {
    if (groups[i] !== 0) {
      i++;
      continue;
    }
    let j = i;
    while (j < 8 && groups[j] === 0) j++;
    if (j - i > best.length && j - i >= 2) best = { start: i, length: j - i };
    i = j;
  }
  const hex = groups.map((g) => g.toString(16));
  if (best.start < 0) return hex.join(':');
  return `${hex.slice(0, best.start).join(':')}::${hex.slice(best.start + best.length).join(':')}`;
}

/** A CIDR; `strict` refuses one with host bits set (10.0.0.1/24). */
export function parsePrefix(text: string, strict = false): Prefix | undefined {
  const slash = text.lastIndexOf('/');
  if (slash <= 0 || !/^\d{1,3}$/.test(text.slice(slash + 1))) return undefined;
  const ip = parseIp(text.slice(0, slash));
  const length = Number(text.slice(slash + 1));
  if (!ip || length > widthOf(ip.family)) return undefined;
  const base = ip.value & mask(ip.family, length);
  if (strict && base !== ip.value) return undefined;
  return { family: ip.family, base, length };
}

export function formatPrefix(prefix: Prefix): string {
  return `${formatIp(prefix.family, prefix.base)}/${prefix.length}`;
}

export function mask(family: Family, length: number): bigint {
  const width = BigInt(widthOf(family));
  return ((1n << width) - 1n) ^ ((1n << (width - BigInt(length))) - 1n);
}

export function size(prefix: Prefix): bigint {
  return 1n << BigInt(widthOf(prefix.family) - prefix.length);
}

export function contains(prefix: Prefix, family: Family, value: bigint): boolean {
  return family === prefix.family && (value & mask(family, prefix.length)) === prefix.base;
}

/** Whether `inner` lies entirely within `outer`. */
export function within(inner: Prefix, outer: Prefix): boolean {
  return inner.length >= outer.length && contains(outer, inner.family, inner.base);
}
