// The connection tracking table through the native addon: every IPv4 and IPv6 connection the
// kernel tracks in the calling process's network namespace, with its tuples both ways and the
// packets and bytes that passed each way (the flow logs' counts), read over ctnetlink; and the
// sysctls that make the kernel count and stamp connections. Failures are thrown as DataplaneError
// naming the operation.
import { addon } from '../native/addon.ts';
import type { ConntrackEntry } from '../native/binding.d.ts';
import { DataplaneError } from './errors.ts';

export type { ConntrackDirection, ConntrackEntry } from '../native/binding.d.ts';

/** Bits of ConntrackEntry.status (`enum ip_conntrack_status`). */
export const CONNTRACK_STATUS = {
  /** A packet was seen in the reply direction. */
  seenReply: 1 << 1,
  /** Seen both ways long enough: not dropped early when the table is full. */
  assured: 1 << 2,
  /** In the table (every dumped entry is). */
  confirmed: 1 << 3,
  /** The source was rewritten (the reply goes to another address than the original source). */
  sourceNat: 1 << 4,
  /** The destination was rewritten (the reply comes from another address than the original destination). */
  destinationNat: 1 << 5,
  /** Going away. */
  dying: 1 << 9,
} as const;

/**
 * Every entry of the process's connection tracking table, IPv4 then IPv6. Packets and bytes are 0
 * for connections that began while accounting was off (see enableConntrackAccounting), `start`
 * and `stop` (ms since the epoch) absent for those that began while timestamps were off.
 */
export async function dumpConntrack(): Promise<ConntrackEntry[]> {
  const outcome = await addon().conntrackDump();
  if (outcome.error) throw new DataplaneError(outcome.error);
  if (outcome.entries === undefined) throw new Error('the data-plane addon returned neither a result nor an error from conntrackDump');
  return outcome.entries;
}

/**
 * Sets `net.netfilter.nf_conntrack_acct` and `net.netfilter.nf_conntrack_timestamp` to 1 in the
 * process's network namespace: connections created from then on are counted and stamped (those
 * already tracked stay as they are).
 */
export async function enableConntrackAccounting(): Promise<void> {
  const outcome = await addon().enableConntrackAccounting();
  if (outcome.error) throw new DataplaneError(outcome.error);
}
