// Address and port intervals for the sets the compiler writes: a rule's `nets` with what `except`
// and `notNets` take out, pod addresses and network-set CIDRs in one set. nftables' interval sets
// refuse overlapping elements, so what goes in is first made disjoint; elements are written as nft
// reads them: an address, a prefix where the interval is one, else a range `a-b`.
import { formatIp, type Family } from '../net/cidr.ts';
import { parseNet } from '../model/policy-schema.ts';

export type { Family } from '../net/cidr.ts';

/** From `start` to `end`, both included. */
export interface Interval {
  start: bigint;
  end: bigint;
}

/** Per family, disjoint intervals in ascending order. */
export interface NetList {
  4: Interval[];
  6: Interval[];
}

const WIDTH = { 4: 32n, 6: 128n } as const;

/** The interval a CIDR or address covers, with its family; undefined when the text is neither. */
export function netInterval(text: string): { family: Family; interval: Interval } | undefined {
  const net = parseNet(text);
  if (!net) return undefined;
  const host = WIDTH[net.family] - BigInt(net.length);
  const start = (net.base >> host) << host;
  return { family: net.family, interval: { start, end: start + (1n << host) - 1n } };
}

/** The CIDRs `texts` cover, per family, made disjoint (texts that are no CIDR are skipped: the schema refused them). */
export function netList(texts: readonly string[]): NetList {
  const list: NetList = { 4: [], 6: [] };
  for (const text of texts) {
    const found = netInterval(text);
    if (found) list[found.family].push(found.interval);
  }
  return { 4: merged(list[4]), 6: merged(list[6]) };
}

/** Sorted, overlapping and adjacent intervals joined. */
export function merged(intervals: readonly Interval[]): Interval[] {
  const sorted = [...intervals].sort((a, b) => (a.start < b.start ? -1 : a.start > b.start ? 1 : 0));
  const out: Interval[] = [];
  for (const next of sorted) {
    const last = out.at(-1);
    if (last && next.start <= last.end + 1n) {
      if (next.end > last.end) out[out.length - 1] = { start: last.start, end: next.end };
    } else out.push({ ...next });
  }
  return out;
}

/** Whether `value` is in one of the sorted, disjoint `intervals`. */
export function covers(intervals: readonly Interval[], value: bigint): boolean {
  let [low, high] = [0, intervals.length - 1];
  while (low <= high) {
    const middle = (low + high) >> 1;
    const interval = intervals[middle] as Interval;
    if (value < interval.start) high = middle - 1;
    else if (value > interval.end) low = middle + 1;
    else return true;
  }
  return false;
}

/** An interval as nft reads it: `10.0.0.5`, `10.0.0.0/24` or `10.0.0.3-10.0.0.9`. */
export function intervalText(family: Family, { start, end }: Interval): string {
  if (start === end) return formatIp(family, start);
  const size = end - start + 1n;
  if ((size & (size - 1n)) === 0n && start % size === 0n) {
    let bits = 0n;
    while (1n << bits < size) bits++;
    return `${formatIp(family, start)}/${WIDTH[family] - bits}`;
  }
  return `${formatIp(family, start)}-${formatIp(family, end)}`;
}

/** A port interval as nft reads it: `80` or `1000-2000`. */
export const portText = ({ from, to }: PortRange): number | string => (from === to ? from : `${from}-${to}`);

export interface PortRange {
  from: number;
  to: number;
}

/** Sorted, overlapping and adjacent ranges joined. */
export function mergedPorts(ranges: readonly PortRange[]): PortRange[] {
  const sorted = [...ranges].sort((a, b) => a.from - b.from);
  const out: PortRange[] = [];
  for (const next of sorted) {
    const last = out.at(-1);
    if (last && next.from <= last.to + 1) last.to = Math.max(last.to, next.to);
    else out.push({ ...next });
  }
  return out;
}

/** An address's family and value; undefined when the text is none (a /32 or /128 suffix is allowed). */
export function parseAddress(text: string): { family: Family; value: bigint } | undefined {
  const found = netInterval(text);
  return found && found.interval.start === found.interval.end ? { family: found.family, value: found.interval.start } : undefined;
}
