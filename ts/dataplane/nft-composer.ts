// netplug's table has several contributors (NAT now, policy later) that must not know each other:
// each gives its part, and the composer writes the union through one writer. Nothing is written
// until every registered contributor has given a first part: a restarting agent that replaced the
// table with only some parts would open, until the others arrive, doors the table had closed.
// Parts given close together are written in one apply; one given while an apply runs is written
// by the next. A part that differs from the last only by set and map elements can go as those
// elements alone (one netlink batch, no diff of the whole table), its record updated all the same,
// so that the next apply of any part writes the table as it is now and undoes none of them.
// A write after one that committed goes as its difference (what changed: ts/nft/delta.ts), which
// the writer checks and sends alone; the first, and any after a failure or after the writer found
// the kernel's table changed by someone else (which a repair asks it to check), go whole.
// A writer that keeps its last commit for the next run (NftTable with a file) is asked to once
// the writes have been quiet a while, and when the composer closes: a restarted agent then writes
// only what changed meanwhile (keeping costs a serialization of the whole table, so not after
// every write).
import { emptyDelta, tableDelta } from '../nft/delta.ts';
import { unionOf } from '../nft/build.ts';
import type { ElementChanges, Family, Table, TableDelta, TablePart } from '../nft/model.ts';

/** What writes the composed table (NftTable in netplug-node; a fake in tests). */
export interface ComposedTableWriter {
  apply(table: Table): Promise<unknown>;
  /** Element changes to the table last applied (without it, element updates are whole writes). */
  updateElements?(changes: ElementChanges): Promise<unknown>;
  /** A change to the table last applied (without it, every write is whole); throws when it cannot. */
  applyDelta?(delta: TableDelta): Promise<unknown>;
  /** Keeps the last commit for the next run. */
  keep?(): Promise<unknown>;
}

export interface NftComposerOptions {
  family: Family;
  name: string;
  /** Every contributor's name: the table is written once each has given a part. */
  contributors: readonly string[];
  writer: ComposedTableWriter;
  /** How long after a change more changes are awaited before writing (default 20 ms). */
  coalesceMs?: number;
  /** Called after each whole write committed (it allocated the whole table's description). */
  afterWholeWrite?: () => void;
  /** How long after the last write the writer keeps it (default 30 s; and always at close). */
  keepAfterMs?: number;
  /** Told when keeping failed (the next run then writes the table whole). */
  keepFailed?: (err: unknown) => void;
}

export interface GiveOptions {
  /**
   * Write without waiting for more parts (what was given before is written with it): for a giver
   * that coalesced its own changes already, or one an ADD waits for.
   */
  now?: boolean;
  /**
   * A periodic repair: the writer checks that the kernel's table is as it last wrote it, and the
   * table is written whole when it is not (the writer's check sees what changes the table's
   * count of chains, sets and objects).
   */
  verify?: boolean;
}

/** `applied`: a write holding the part committed; `waiting`: other contributors have given no part yet. */
export type PartOutcome = 'applied' | 'waiting';

interface Waiter {
  resolve(outcome: PartOutcome): void;
  reject(err: unknown): void;
}

export class NftComposer {
  readonly #options: NftComposerOptions;
  readonly #parts = new Map<string, TablePart>();
  #waiters: Waiter[] = [];
  /** The pending write's cancellation, while one is scheduled. */
  #timer: (() => void) | undefined;
  #running: Promise<void> | undefined;
  #closed = false;
  /**
   * The writer's table is the union of the parts recorded when it was last written (an apply, or
   * element updates, committed and none failed since): element changes apply to it.
   */
  #inStep = false;
  /** A waiting part asked to be written without the coalescing wait. */
  #now = false;
  /** A waiting part asked for the kernel's table to be checked. */
  #verifyDue = false;
  /**
   * What the writer holds, while `#inStep`: the parts it is the union of, made a table only when a
   * whole write needs it (an element update would otherwise build the union of every part).
   */
  #written: { table: Table } | { parts: ReadonlyMap<string, TablePart> } | undefined;
  /** The pending keep's cancellation, while one is scheduled. */
  #keepTimer: (() => void) | undefined;

  constructor(options: NftComposerOptions) {
    const seen = new Set<string>();
    for (const name of options.contributors) {
      if (seen.has(name)) throw new Error(`nftables contributor "${name}" is registered twice`);
      seen.add(name);
    }
    this.#options = options;
  }

  /**
   * Sets `contributor`'s part. Resolves `applied` once a write holding it committed (rejecting
   * with that write's error), or at once `waiting` while another contributor has given no part.
   */
  setPart(contributor: string, part: TablePart, options: GiveOptions = {}): Promise<PartOutcome> {
    if (!this.#options.contributors.includes(contributor))
      throw new Error(`"${contributor}" is not a registered contributor to table ${this.#options.family} ${this.#options.name}`);
    if (this.#closed) return Promise.reject(new Error(`table ${this.#options.family} ${this.#options.name}: the composer is closed`));
    this.#parts.set(contributor, part);
    if (options.verify) this.#verifyDue = true;
    if (this.missing().length > 0) return Promise.resolve('waiting');
    return new Promise<PartOutcome>((resolve, reject) => {
      this.#waiters.push({ resolve, reject });
      this.#schedule(options.now === true);
    });
  }

  /**
   * Sets `contributor`'s part, which differs from the part it gave last only by `elements`: when
   * the writer's table holds that last part and no whole write is pending, only the elements are
   * written, at once (the writer runs calls in order, so after a running apply). Otherwise as
   * `setPart`. Resolves as `setPart` does.
   */
  updatePart(contributor: string, part: TablePart, elements: ElementChanges, options: GiveOptions = {}): Promise<PartOutcome> {
    const { writer } = this.#options;
    const pending = this.#waiters.length > 0 || this.#timer !== undefined;
    if (!writer.updateElements || !this.#inStep || pending || this.#closed || !this.#parts.has(contributor) || this.missing().length > 0)
      return this.setPart(contributor, part, options);
    this.#parts.set(contributor, part);
    // The parts as this update leaves the writer's table: one given meanwhile is not in it yet.
    const given = this.#orderedParts();
    return writer.updateElements(elements).then(
      () => {
        // A whole write begun since records its own table.
        if (this.#inStep) this.#written = { parts: given };
        this.#scheduleKeep();
        return 'applied' as const;
      },
      (err: unknown) => {
        // The writer may hold neither table now: the next write is whole.
        this.#inStep = false;
        throw err;
      },
    );
  }

  /** The contributors that have given no part yet. */
  missing(): string[] {
    return this.#options.contributors.filter((name) => !this.#parts.has(name));
  }

  /** The table the parts make now (in the contributors' order), once every part is there. */
  table(): Table | undefined {
    if (this.missing().length > 0) return undefined;
    return unionOf(this.#options.family, this.#options.name, this.#orderedParts());
  }

  /** The parts given, in the contributors' order. */
  #orderedParts(): Map<string, TablePart> {
    return new Map(this.#options.contributors.map((name) => [name, this.#parts.get(name) as TablePart]));
  }

  /**
   * Stops writing: a pending write is dropped (its waiters rejected), a running one finishes, and
   * the writer keeps what it committed last.
   */
  async close(): Promise<void> {
    this.#closed = true;
    this.#timer?.();
    this.#timer = undefined;
    this.#keepTimer?.();
    this.#keepTimer = undefined;
    const dropped = this.#waiters.splice(0);
    for (const waiter of dropped) waiter.reject(new Error(`table ${this.#options.family} ${this.#options.name}: the composer closed`));
    await this.#running;
    if (this.#inStep) await this.#keep();
  }

  /** After each write: the writer keeps it once writes have been quiet for `keepAfterMs`. */
  #scheduleKeep(): void {
    if (!this.#options.writer.keep || this.#closed) return;
    this.#keepTimer?.();
    const timeout = setTimeout(() => {
      this.#keepTimer = undefined;
      void this.#keep();
    }, this.#options.keepAfterMs ?? 30_000);
    timeout.unref();
    this.#keepTimer = () => clearTimeout(timeout);
  }

  async #keep(): Promise<void> {
    try {
      await this.#options.writer.keep?.();
    } catch (err) {
      this.#options.keepFailed?.(err);
    }
  }

  #schedule(now: boolean): void {
    // A part to write now, given while a write runs, is written as soon as that one ends.
    if (now) this.#now = true;
    if (this.#running || this.#closed) return;
    if (this.#timer && !this.#now) return;
    this.#timer?.();
    // Now: after the parts given in this turn of the event loop (setImmediate; a setTimeout of 0
    // waits a millisecond at least, on the path of every ADD the agent polices).
    if (this.#now) {
      const immediate = setImmediate(() => this.#write());
      this.#timer = () => clearImmediate(immediate);
    } else {
      const timeout = setTimeout(() => this.#write(), this.#options.coalesceMs ?? 20);
      this.#timer = () => clearTimeout(timeout);
    }
  }

  /** The table the writer holds (while `#inStep`). */
  #writtenTable(): Table | undefined {
    const written = this.#written;
    if (!written || 'table' in written) return written?.table;
    const table = unionOf(this.#options.family, this.#options.name, written.parts);
    this.#written = { table };
    return table;
  }

  #write(): void {
    this.#timer = undefined;
    this.#now = false;
    const waiters = this.#waiters.splice(0);
    if (waiters.length === 0) return;
    let table: Table;
    try {
      table = this.table() as Table;
    } catch (err) {
      for (const waiter of waiters) waiter.reject(err);
      return;
    }
    const { writer } = this.#options;
    const written = this.#inStep ? this.#writtenTable() : undefined;
    const delta = written && writer.applyDelta ? tableDelta(written, table) : undefined;
    const verify = this.#verifyDue;
    this.#verifyDue = false;
    this.#inStep = false;
    const whole = () => writer.apply(table).then(() => this.#options.afterWholeWrite?.());
    let write: Promise<unknown>;
    if (delta === undefined || !writer.applyDelta) write = whole();
    else if (emptyDelta(delta) && !verify) write = Promise.resolve();
    // The writer refuses a difference (an empty one included: the repair's check) when the
    // kernel's table is not as it last wrote it (someone else changed it): it is written whole.
    else write = writer.applyDelta(delta).catch(whole);
    this.#running = write.then(
      () => {
        this.#inStep = true;
        this.#written = { table };
        for (const waiter of waiters) waiter.resolve('applied');
        this.#scheduleKeep();
      },
      (err: unknown) => {
        for (const waiter of waiters) waiter.reject(err);
      },
    );
    void this.#running.finally(() => {
      this.#running = undefined;
      if (this.#waiters.length > 0) this.#schedule(false);
    });
  }
}
