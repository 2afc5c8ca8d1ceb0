// netplug's nftables table through the native addon: writes descriptions (ts/nft/model.ts) to the
// kernel over netlink in atomic transactions, the first whole, later ones by difference; element
// updates; counters; NFLOG subscriptions; and the removal of a chain an older release left in
// iptables-nft. Every call acts on the calling process's network namespace, on a thread of the
// addon; failures are thrown as DataplaneError naming the operation and the object.
import { addon } from '../native/addon.ts';
import type { KernelError, NflogPacket, NflogSubscription as NativeSubscription } from '../native/binding.d.ts';
import type { ElementChanges, Family, Table, TableDelta } from '../nft/model.ts';
import { DataplaneError } from './errors.ts';

export type { NflogPacket } from '../native/binding.d.ts';

/** What a write sent. */
export interface NftApplyReport {
  /** Whether the table was replaced whole (the first write, and any after a failure). */
  replaced: boolean;
  /** Messages in the transaction; 0 when the kernel already held the description. */
  operations: number;
  bytes: number;
}

export interface NftCounterValue {
  packets: number;
  bytes: number;
}

/** Writes one table; calls run one after another, in the order they were made. */
export class NftTable {
  readonly family: Family;
  readonly name: string;
  readonly #writer: InstanceType<ReturnType<typeof addon>['NftTableWriter']>;
  #queue: Promise<unknown> = Promise.resolve();

  /**
   * `keptPath`: a file where the writer keeps its last commit between runs (`keep`); the first
   * apply of the next run then writes only what changed, when the kernel's table is still the
   * one the file describes (same namespace, same table, unchanged by others, same encoder), and
   * the whole table otherwise.
   */
  constructor(family: Family, name: string, keptPath?: string) {
    this.family = family;
    this.name = name;
    this.#writer = new (addon().NftTableWriter)(family, name, keptPath);
  }

  /** Makes the kernel's table equal `table` (its family and name must be this writer's). */
  apply(table: Table): Promise<NftApplyReport> {
    return this.#serial(async () => report(await this.#writer.apply(JSON.stringify(table))));
  }

  /**
   * Changes the table last applied by `delta` (what changed since), in one transaction; throws,
   * with nothing sent, when the kernel's table is not as last written (apply it whole then).
   */
  applyDelta(delta: TableDelta): Promise<NftApplyReport> {
    return this.#serial(async () => report(await this.#writer.applyDelta(JSON.stringify(delta))));
  }

  /** Adds and deletes set and map elements of the table last applied, in one transaction. */
  updateElements(changes: ElementChanges): Promise<NftApplyReport> {
    return this.#serial(async () => report(await this.#writer.updateElements(JSON.stringify(changes))));
  }

  /**
   * Writes the last commit to the file given as `keptPath` (after the calls before this one);
   * says whether it did (nothing is committed after a failed write, and without a file).
   */
  keep(): Promise<boolean> {
    return this.#serial(async () => {
      const outcome = await this.#writer.keep();
      return settled(outcome, outcome.kept, 'keep');
    });
  }

  /** The table's named counters, by name. */
  counters(): Promise<Map<string, NftCounterValue>> {
    return this.#serial(async () => {
      const outcome = await this.#writer.counters();
      const counters = settled(outcome, outcome.counters, 'counters');
      return new Map(counters.map((c) => [c.name, { packets: c.packets, bytes: c.bytes }]));
    });
  }

  /** Deletes the table if it is there; says whether it was. The next apply writes it whole. */
  remove(): Promise<boolean> {
    return this.#serial(async () => {
      const outcome = await this.#writer.remove();
      return settled(outcome, outcome.removed, 'remove');
    });
  }

  #serial<T>(call: () => Promise<T>): Promise<T> {
    const result = this.#queue.then(call, call);
    this.#queue = result.catch(() => undefined);
    return result;
  }
}

/** A running NFLOG subscription. */
export interface NflogSubscription {
  /** Stops it and unbinds the group (the subscription keeps the process alive until then). */
  stop(): Promise<void>;
}

/**
 * Calls `onPacket` for every packet logged to NFLOG group `group` (`log prefix "..." group N`);
 * fails at once if another listener holds the group. The kernel sends packets in batches (up to
 * 20 ms after the first), and a batch comes in one call from the addon.
 */
export async function subscribeNflog(group: number, onPacket: (packet: NflogPacket) => void): Promise<NflogSubscription> {
  const outcome = await addon().subscribeNflog(group, (packets) => {
    for (const packet of packets) onPacket(packet);
  });
  const native: NativeSubscription = settled(outcome, outcome.subscription, 'subscribeNflog');
  return {
    async stop() {
      const stopped = await native.stop();
      if (stopped.error) throw new DataplaneError(stopped.error);
    },
  };
}

/**
 * Removes chain `chain` of the IPv4 iptables-nft table `table` and every rule jumping to it, in
 * one transaction; returns the chains those rules were in, or undefined if there was no chain.
 */
export async function removeIptablesChain(table: string, chain: string): Promise<string[] | undefined> {
  const outcome = await addon().removeIptablesChain(table, chain);
  if (outcome.error) throw new DataplaneError(outcome.error);
  return outcome.removedJumpsFrom;
}

function report(outcome: { report?: NftApplyReport; error?: KernelError }): NftApplyReport {
  return settled(outcome, outcome.report, 'apply');
}

function settled<T>(outcome: { error?: KernelError }, value: T | undefined, call: string): T {
  if (outcome.error) throw new DataplaneError(outcome.error);
  if (value === undefined) throw new Error(`the data-plane addon returned neither a result nor an error from ${call}`);
  return value;
}
