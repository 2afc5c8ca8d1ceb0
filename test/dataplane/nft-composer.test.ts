// The composer of netplug's nftables table (pure: a recording writer stands in for the kernel):
// nothing is written before every contributor gave a part, the union of the parts is written,
// parts given close together make one write, a failed write rejects its callers and the next
// part is written again, two contributors claiming one name are refused naming both; a part
// changed by elements alone goes as those elements, recorded for the next whole write; a part
// given while such an update is under way is written next, not taken as already written.

import test from 'ava';

import { NftComposer, type ComposedTableWriter } from '../../ts/dataplane/nft-composer.ts';
import type { ElementChanges, Table, TableDelta, TablePart } from '../../ts/nft/model.ts';

class RecordingWriter implements ComposedTableWriter {
  written: Table[] = [];
  failNext: Error | undefined;
  /** While set, a write waits for it: the test decides when the kernel "answers". */
  gate: Promise<void> | undefined;
  started: (() => void) | undefined;
  async apply(table: Table): Promise<void> {
    this.started?.();
    await this.gate;
    const failure = this.failNext;
    this.failNext = undefined;
    if (failure) throw failure;
    this.written.push(table);
  }
}

const nat: TablePart = {
  chains: [
    { name: 'nat-outgoing', base: { type: 'nat', hook: 'postrouting', priority: 110 }, rules: [{ statements: [{ masquerade: {} }] }] },
  ],
};
const policy = (peers: string[]): TablePart => ({
  chains: [
    {
      name: 'forward',
      base: { type: 'filter', hook: 'forward', priority: 10 },
      rules: [{ matches: [{ key: 'ip saddr', value: { set: 'peers' } }], verdict: 'accept' }],
    },
  ],
  sets: [{ name: 'peers', type: 'ipv4_addr', elements: peers }],
});

function composer(writer: ComposedTableWriter, coalesceMs = 20): NftComposer {
  return new NftComposer({ family: 'inet', name: 'netplug', contributors: ['nat', 'policy'], writer, coalesceMs });
}

test('nothing is written until every contributor has given a part; then their union is', async (t) => {
  const writer = new RecordingWriter();
  const tables = composer(writer);
  t.is(await tables.setPart('nat', nat), 'waiting');
  t.deepEqual(tables.missing(), ['policy']);
  await new Promise((resolve) => setTimeout(resolve, 60));
  t.deepEqual(writer.written, [], 'a partial table is never written');
  t.is(await tables.setPart('policy', policy(['10.0.0.1'])), 'applied');
  t.is(writer.written.length, 1);
  t.deepEqual(writer.written[0], {
    family: 'inet',
    name: 'netplug',
    chains: [...(nat.chains ?? []), ...(policy([]).chains ?? [])],
    sets: policy(['10.0.0.1']).sets,
    maps: [],
    counters: [],
  });
  t.throws(() => tables.setPart('dns', {}), { message: /"dns" is not a registered contributor/ });
});

test('a burst of parts is written once, and a part given during a write by the next one', async (t) => {
  const writer = new RecordingWriter();
  const tables = composer(writer);
  await tables.setPart('nat', nat);
  const burst = [1, 2, 3, 4, 5].map((n) => tables.setPart('policy', policy([`10.0.0.${n}`])));
  t.deepEqual(await Promise.all(burst), ['applied', 'applied', 'applied', 'applied', 'applied']);
  t.is(writer.written.length, 1, 'five parts in a burst, one write');
  t.deepEqual(writer.written[0]?.sets?.[0]?.elements, ['10.0.0.5'], 'the last part wins');

  // One part starts a write; the next, given while it runs, waits for it and is written after.
  let release = () => {};
  writer.gate = new Promise((resolve) => {
    release = resolve;
  });
  const started = new Promise<void>((resolve) => {
    writer.started = resolve;
  });
  const first = tables.setPart('policy', policy(['10.0.1.1']));
  await started;
  writer.started = undefined;
  const second = tables.setPart('nat', {});
  writer.gate = undefined;
  release();
  t.deepEqual(await Promise.all([first, second]), ['applied', 'applied']);
  t.is(writer.written.length, 3);
  t.deepEqual(
    writer.written[1]?.chains?.map((c) => c.name),
    ['nat-outgoing', 'forward'],
    'the write that ran held the nat part',
  );
  t.deepEqual(
    writer.written[2]?.chains?.map((c) => c.name),
    ['forward'],
    'the next one no longer did',
  );
});

test('a failed write rejects the parts it held; the next part writes again', async (t) => {
  const writer = new RecordingWriter();
  const tables = composer(writer);
  await tables.setPart('nat', nat);
  writer.failNext = new Error('add rule 1 of chain "forward": No such file or directory [ENOENT]');
  await t.throwsAsync(tables.setPart('policy', policy(['10.0.0.1'])), { message: /add rule 1 of chain "forward"/ });
  t.is(await tables.setPart('policy', policy(['10.0.0.2'])), 'applied');
  t.deepEqual(
    writer.written.map((table) => table.sets?.[0]?.elements),
    [['10.0.0.2']],
  );
});

test('two contributors claiming one name are refused, naming both; nothing is written', async (t) => {
  const writer = new RecordingWriter();
  const tables = composer(writer);
  await tables.setPart('nat', { chains: [{ name: 'forward' }] });
  await t.throwsAsync(tables.setPart('policy', policy([])), {
    message: 'table inet netplug: chain "forward" is both nat\'s and policy\'s',
  });
  t.deepEqual(writer.written, []);
  t.throws(() => new NftComposer({ family: 'inet', name: 'x', contributors: ['a', 'a'], writer }), { message: /registered twice/ });
});

test('closing drops a pending write and refuses later parts', async (t) => {
  const writer = new RecordingWriter();
  const tables = composer(writer, 1_000);
  await tables.setPart('nat', nat);
  const pending = tables.setPart('policy', policy([]));
  await tables.close();
  await t.throwsAsync(pending, { message: /closed/ });
  await t.throwsAsync(tables.setPart('nat', nat), { message: /closed/ });
  t.deepEqual(writer.written, []);
});

class ElementWriter extends RecordingWriter {
  updates: ElementChanges[] = [];
  failNextUpdate: Error | undefined;
  async updateElements(changes: ElementChanges): Promise<void> {
    const failure = this.failNextUpdate;
    this.failNextUpdate = undefined;
    if (failure) throw failure;
    this.updates.push(changes);
  }
}

test('a part changed by elements alone is written as those elements, and recorded for the next whole write', async (t) => {
  const writer = new ElementWriter();
  const tables = composer(writer);
  const add = (address: string): ElementChanges => ({ sets: [{ name: 'peers', add: [address] }] });
  await tables.setPart('nat', nat);
  // Before any whole write the table is not there to update: the part is written whole.
  t.is(await tables.updatePart('policy', policy(['10.0.0.1']), add('10.0.0.1')), 'applied');
  t.is(writer.written.length, 1);
  t.deepEqual(writer.updates, []);

  t.is(await tables.updatePart('policy', policy(['10.0.0.1', '10.0.0.2']), add('10.0.0.2')), 'applied');
  t.deepEqual(writer.updates, [add('10.0.0.2')], 'the elements alone');
  t.is(writer.written.length, 1, 'no whole write');
  t.deepEqual(tables.table()?.sets?.[0]?.elements, ['10.0.0.1', '10.0.0.2']);

  // The nat part changes: the whole write holds the policy part as the element update left it.
  await tables.setPart('nat', {});
  t.deepEqual(writer.written[1]?.sets?.[0]?.elements, ['10.0.0.1', '10.0.0.2']);

  // A refused element batch rejects its caller; the next part is written whole.
  writer.failNextUpdate = new Error('update elements of table inet netplug: No such file or directory [ENOENT]');
  await t.throwsAsync(tables.updatePart('policy', policy(['10.0.0.1', '10.0.0.2', '10.0.0.3']), add('10.0.0.3')), {
    message: /update elements/,
  });
  t.is(await tables.updatePart('policy', policy(['10.0.0.1', '10.0.0.2', '10.0.0.4']), add('10.0.0.4')), 'applied');
  t.is(writer.written.length, 3);
  t.deepEqual(writer.written[2]?.sets?.[0]?.elements, ['10.0.0.1', '10.0.0.2', '10.0.0.4']);
  t.is(writer.updates.length, 1);
});

test('an element update while a whole write waits joins that write; `now` writes without the coalescing wait', async (t) => {
  const writer = new ElementWriter();
  // An hour's coalescing: a write that waited it out would outlast the test's timeout.
  const tables = composer(writer, 3_600_000);
  t.teardown(() => tables.close());
  await tables.setPart('nat', nat);
  t.is(await tables.setPart('policy', policy(['10.0.0.1']), { now: true }), 'applied', 'not held for the coalescing');
  const pending = tables.setPart('nat', {});
  const joined = tables.updatePart(
    'policy',
    policy(['10.0.0.1', '10.0.0.2']),
    { sets: [{ name: 'peers', add: ['10.0.0.2'] }] },
    { now: true },
  );
  t.deepEqual(await Promise.all([pending, joined]), ['applied', 'applied'], 'the part to write now hurried the waiting write');
  t.deepEqual(writer.updates, [], 'a whole write was due: the part went with it');
  t.is(writer.written.length, 2);
  t.deepEqual(
    writer.written[1]?.chains?.map((c) => c.name),
    ['forward'],
  );
  t.deepEqual(writer.written[1]?.sets?.[0]?.elements, ['10.0.0.1', '10.0.0.2']);
});

/** Writes differences too; an element update waits for `updateGate` while it is set. */
class DeltaWriter extends ElementWriter {
  deltas: TableDelta[] = [];
  updateGate: Promise<void> | undefined;
  override async updateElements(changes: ElementChanges): Promise<void> {
    await this.updateGate;
    await super.updateElements(changes);
  }
  async applyDelta(delta: TableDelta): Promise<void> {
    this.deltas.push(delta);
  }
}

test('a part given while an element update is under way is in the next write, not taken as written', async (t) => {
  const writer = new DeltaWriter();
  const tables = composer(writer);
  t.teardown(() => tables.close());
  await tables.setPart('nat', nat);
  await tables.setPart('policy', policy(['10.0.0.1']), { now: true });
  let answer = () => {};
  writer.updateGate = new Promise((resolve) => (answer = resolve));
  const updated = tables.updatePart('policy', policy(['10.0.0.1', '10.0.0.2']), { sets: [{ name: 'peers', add: ['10.0.0.2'] }] });
  // NAT's part changes while the kernel has not answered the update; its write waits its coalescing.
  const natChain = { name: 'nat-second', rules: [] };
  const given = tables.setPart('nat', { chains: [...(nat.chains ?? []), natChain] });
  answer();
  t.deepEqual(await Promise.all([updated, given]), ['applied', 'applied']);
  t.deepEqual(writer.updates, [{ sets: [{ name: 'peers', add: ['10.0.0.2'] }] }]);
  t.deepEqual(
    writer.deltas.map((delta) => delta.chains?.map((chain) => chain.name)),
    [['nat-second']],
    "NAT's new chain is written",
  );
});

test('the writer keeps its last commit once writes have been quiet, and at close; not after a failed write', async (t) => {
  const writer = new RecordingWriter();
  const kept: number[] = [];
  const keeping: ComposedTableWriter = { apply: (table) => writer.apply(table), keep: async () => kept.push(writer.written.length) };
  const tables = new NftComposer({ family: 'inet', name: 'netplug', contributors: ['nat', 'policy'], writer: keeping, keepAfterMs: 50 });
  await tables.setPart('nat', nat);
  await tables.setPart('policy', policy(['10.0.0.1']));
  await tables.setPart('policy', policy(['10.0.0.2']));
  t.deepEqual(kept, [], 'not while writes come');
  while (kept.length === 0) await new Promise((resolve) => setTimeout(resolve, 20));
  await new Promise((resolve) => setTimeout(resolve, 100));
  t.deepEqual(kept, [2], 'once, after the writes were quiet');
  writer.failNext = new Error('refused');
  await t.throwsAsync(tables.setPart('policy', policy(['10.0.0.3'])));
  await tables.close();
  t.deepEqual(kept, [2], 'after a failed write there is nothing to keep');

  const again = new NftComposer({ family: 'inet', name: 'netplug', contributors: ['nat'], writer: keeping, keepAfterMs: 60_000 });
  await again.setPart('nat', nat);
  await again.close();
  t.deepEqual(kept, [2, 3], 'at close, without waiting');
});
