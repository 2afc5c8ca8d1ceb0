// Datastore documents netplug cannot use, written straight into a real etcd (as a hand edit or a
// broken tool would): ADD fails with error 7 naming the document (kind, name, key) and the field,
// takes no address and leaves no interface; netplugctl says the same in one line. Never error 999.
import test, { type ExecutionContext } from 'ava';
import { Etcd3 } from 'etcd3';

import { hasStackTrace, invoke } from '../helpers/cni.ts';
import { startEtcd, type EtcdServer } from '../helpers/etcd.ts';
import { ctl, ctlOk, etcdKeys, ipamNetconf, totalAllocated } from '../helpers/ipam.ts';
import { containerId, createNetns, link } from '../helpers/kernel.ts';
import { handleId, keys } from '../../ts/model/keys.ts';

const POOL_KEY = keys.pool('bad');
const goodPool = (spec: Record<string, unknown> = {}) => ({
  kind: 'IPPool',
  apiVersion: 'projectnet.org/v3',
  metadata: { name: 'bad', creationTimestamp: '2026-01-01T00:00:00Z' },
  spec: {
    cidr: '10.81.0.0/16',
    blockSize: 26,
    nodeSelector: 'all()',
    ipipMode: 'Never',
    vxlanMode: 'Never',
    natOutgoing: false,
    disabled: false,
    ...spec,
  },
});

/** An etcd with a writer of its own (the etcd3 package): documents put behind netplug's back. */
async function etcdWithWriter(
  t: ExecutionContext,
): Promise<{ etcd: EtcdServer; put: (key: string, value: unknown) => Promise<void>; remove: (key: string) => Promise<void> }> {
  const etcd = await startEtcd(t);
  const client = new Etcd3({ hosts: etcd.endpoints });
  t.teardown(() => client.close());
  return {
    etcd,
    put: async (key, value) => void (await client.put(key).value(typeof value === 'string' ? value : JSON.stringify(value))),
    remove: async (key) => void (await client.delete().key(key)),
  };
}

/** An ADD refused with `code`, its message matching `message`: nothing allocated, no interface. */
function refusedAdd(t: ExecutionContext, etcd: EtcdServer, message: RegExp, options: { id?: string; code?: number } = {}): void {
  const netns = createNetns(t, 'baddoc');
  const add = invoke({
    command: 'ADD',
    containerId: options.id ?? containerId(),
    netns: netns.path,
    netconf: ipamNetconf(etcd, { name: 'baddoc' }),
  });
  t.is(add.status, 1, add.stdout);
  t.is(add.json?.code, options.code ?? 7, add.stdout);
  t.regex(add.json?.msg ?? '', message);
  t.false(hasStackTrace(add.stdout + add.stderr));
  t.is(link('eth0', netns), undefined, 'no interface left');
}

/** netplugctl refused in one line matching `message`. */
function refusedCtl(t: ExecutionContext, etcd: EtcdServer, args: string[], message: RegExp): void {
  const run = ctl(etcd, ...args);
  t.is(run.status, 1, run.stdout);
  t.is(run.stderr.trimEnd().split('\n').length, 1, run.stderr);
  t.regex(run.stderr, message);
  t.notRegex(run.stderr, /internal error/);
}

test('a broken pool: ADD gets error 7 naming the pool and the field; netplugctl says so; pool delete --force removes it', async (t) => {
  const { etcd, put } = await etcdWithWriter(t);
  const broken: Array<[unknown, RegExp]> = [
    [goodPool({ blockSize: 'x' }), /field "spec\.blockSize" must be a whole number from 20 to 32 \(for 10\.81\.0\.0\/16\), got "x"/],
    [goodPool({ blockSize: 12 }), /field "spec\.blockSize" must be a whole number from 20 to 32 .*got 12/],
    [goodPool({ cidr: 'ten/8' }), /field "spec\.cidr" must be a CIDR, got "ten\/8"/],
    [goodPool({ nodeSelector: 'zone ===' }), /field "spec\.nodeSelector" is not a selector: selector "zone ==="/],
    [goodPool({ disabled: 'yes' }), /field "spec\.disabled" must be true or false, got "yes"/],
    [goodPool({ ipipMode: 'Sometimes' }), /field "spec\.ipipMode" must be one of Never, Always, CrossSubnet, got "Sometimes"/],
    [{ ...goodPool(), spec: undefined }, /field "spec" must be an object, got nothing/],
    [{ ...goodPool(), metadata: { name: 7 } }, /field "metadata\.name" must be a name, got 7/],
    [[1, 2, 3], /field "\." must be an object, got \[1,2,3\]/],
    [goodPool({ nodeSelector: 'x'.repeat(100_000) }), /field "spec\.nodeSelector"/],
  ];
  for (const [document, field] of broken) {
    await put(POOL_KEY, document);
    const prefix = /^the datastore's IPPool "bad" \(key \/netplug\/resources\/v3\/projectnet\.org\/ippools\/bad\) is broken: /;
    refusedAdd(t, etcd, new RegExp(prefix.source + field.source));
    refusedCtl(t, etcd, ['pool', 'list'], new RegExp(`^netplugctl: ${prefix.source.slice(1)}${field.source}.*; repair or remove it\\n$`));
  }
  // An echoed value is cut short: a document may be huge.
  const huge = invoke({ command: 'ADD', containerId: containerId(), netns: createNetns(t, 'baddoc').path, netconf: ipamNetconf(etcd) });
  t.true(huge.stdout.length < 1000, `${huge.stdout.length} characters`);
  // Not JSON at all: error 7 too (a repair fixes it, not a retry), naming the key.
  await put(POOL_KEY, '{"kind": "IPPool", ');
  refusedAdd(
    t,
    etcd,
    /the datastore's document at \/netplug\/resources\/v3\/projectnet\.org\/ippools\/bad is not JSON; repair or remove it/,
  );
  await put(POOL_KEY, goodPool({ blockSize: 'x' }));
  refusedCtl(t, etcd, ['pool', 'delete', 'bad'], /is broken: field "spec\.blockSize" .*\(pool delete --force removes it\)\n$/);
  t.regex(ctlOk(t, etcd, 'pool', 'delete', 'bad', '--force').stdout, /^pool "bad" deleted\n$/);
  t.deepEqual(await etcdKeys(t, etcd, keys.pools), []);
  t.is(totalAllocated(t, etcd), 0);
});

test("a broken block, handle or affinity key on the ADD's path: error 7 naming it; ipam show and check say so too", async (t) => {
  const { etcd, put, remove } = await etcdWithWriter(t);
  await put(POOL_KEY, goodPool());
  const block = '10.81.0.0/26';
  const good = {
    cidr: block,
    affinity: 'host:node-a',
    allocations: Array(64).fill(null),
    unallocated: Array.from({ length: 64 }, (_, i) => i),
    attributes: [],
    sequenceNumber: 0,
    deleted: false,
  };
  const blockKey = keys.block(block);
  await put(keys.affinity('node-a', block), { state: 'confirmed', deleted: false });
  const blockName =
    /the datastore's IPAMBlock "10\.81\.0\.0-26" \(key \/netplug\/ipam\/v2\/assignment\/ipv4\/block\/10\.81\.0\.0-26\) is broken: /;
  const cases: Array<[unknown, RegExp]> = [
    [{ ...good, allocations: 'x' }, /field "allocations" must be a list of 64 entries \(one per address of 10\.81\.0\.0\/26\), got "x"/],
    [{ ...good, allocations: [null] }, /field "allocations" must be a list of 64 entries/],
    [
      { ...good, allocations: [3, ...good.allocations.slice(1)] },
      /field "allocations\[0\]" must be null or an index into attributes \(0 to -1\), got 3/,
    ],
    [{ ...good, unallocated: [64] }, /field "unallocated\[0\]" must be an ordinal from 0 to 63, got 64/],
    [{ ...good, attributes: [{ handle_id: 'h' }] }, /field "attributes\[0\]\.secondary" must be an object of strings, got nothing/],
    [{ ...good, cidr: '10.81.0.64/26' }, /field "cidr" must be the CIDR its key names, 10\.81\.0\.0\/26, got "10\.81\.0\.64\/26"/],
    [{ ...good, affinity: 5 }, /field "affinity" must be host:<node> or null, got 5/],
  ];
  for (const [document, field] of cases) {
    await put(blockKey, document);
    refusedAdd(t, etcd, new RegExp(blockName.source + field.source));
    refusedCtl(t, etcd, ['ipam', 'show'], new RegExp(blockName.source + field.source));
    refusedCtl(t, etcd, ['ipam', 'check'], new RegExp(blockName.source + field.source));
  }
  await put(blockKey, good);

  // The handle of the ADD's own attachment (a repeated ADD reads it first).
  const id = containerId();
  const handleKey = keys.handle(handleId('baddoc', id));
  await put(handleKey, { handleID: handleId('baddoc', id), block: { 'not-a-cidr': 1 }, deleted: false });
  refusedAdd(
    t,
    etcd,
    /the datastore's IPAMHandle "baddoc\.[0-9a-f]+" \(key .*\) is broken: field "block" must have block CIDRs as keys, got "not-a-cidr"/,
    { id },
  );
  await put(handleKey, { handleID: handleId('baddoc', id), block: [] });
  refusedAdd(t, etcd, /IPAMHandle .* is broken: field "block" must be an object of block CIDR to address count, got \[\]/, { id });
  await remove(handleKey);

  // An affinity key of the node that names no block.
  const stray = `${keys.affinities('node-a', 4)}garbage`;
  await put(stray, { state: 'confirmed', deleted: false });
  refusedAdd(
    t,
    etcd,
    /the datastore's BlockAffinity "node-a\/ipv4\/block\/garbage" \(key .*\) is broken: its key must end in a block CIDR \(10\.0\.0\.0-26\), got "garbage"/,
  );
  await remove(stray);

  const add = invoke({
    command: 'ADD',
    containerId: id,
    netns: createNetns(t, 'baddoc').path,
    netconf: ipamNetconf(etcd, { name: 'baddoc' }),
  });
  t.is(add.status, 0, `repaired, the ADD succeeds: ${add.stdout}`);
  t.is(totalAllocated(t, etcd), 1);
  t.is(invoke({ command: 'DEL', containerId: id, netconf: ipamNetconf(etcd, { name: 'baddoc' }) }).status, 0);
});
