// The pure parts of address management: address arithmetic, block bookkeeping, checks of documents.
import { isIP } from 'node:net';

import test from 'ava';

import {
  addressOf,
  allocatedCount,
  assignNext,
  assignOrdinal,
  newBlock,
  ordinalOf,
  ordinalsOf,
  releaseOrdinals,
} from '../../ts/ipam/block.ts';
import { formatIp, formatPrefix, parseIp, parsePrefix, within } from '../../ts/net/cidr.ts';
import { poolChanges } from '../../ts/ctl/pool-update.ts';
import { IpamError } from '../../ts/ipam/errors.ts';
import { cidrOfKey, keys } from '../../ts/model/keys.ts';
import { checkedBlock, checkedHandle, checkedPool, isPendingRequest } from '../../ts/model/checked-documents.ts';

test('addresses round-trip in canonical form', (t) => {
  for (const ip of ['10.0.0.1', '255.255.255.255', '::', '::1', 'fd00::5', 'fd00:0:0:1::', '2001:db8::1:0:0:1', '1:2:3:4:5:6:7:8']) {
    const parsed = parseIp(ip);
    t.is(formatIp(parsed?.family ?? 4, parsed?.value ?? 0n), ip);
  }
  t.is(formatIp(6, parseIp('fd00:0000:0000:0000:0000:0000:0000:0005')?.value ?? 0n), 'fd00::5');
  t.is(formatIp(6, parseIp('::ffff:10.1.2.3')?.value ?? 0n), '::ffff:a01:203');
});

test('addresses are accepted exactly where node:net isIP accepts them (zones aside)', (t) => {
  const cases = [
    '1.2.3.4',
    '01.2.3.4',
    '1.2.3',
    '1.2.3.4.5',
    '256.1.1.1',
    '0.0.0.0',
    '1.2.3.4.',
    ' 1.2.3.4',
    '::',
    '::1',
    '1::',
    '1:2:3:4:5:6:7:8',
    '1:2:3:4:5:6:7::',
    '::2:3:4:5:6:7:8',
    '1:2:3:4:5:6:7:8::',
    '1::2::3',
    ':1::',
    '1:::2',
    '::ffff:1.2.3.4',
    '::ffff:1.2.3',
    '1:2:3:4:5:6:1.2.3.4',
    '1:2:3:4:5:6:7:1.2.3.4',
    '12345::',
    'g::',
    'fd77::1:30ed:64c0',
    '',
    '::1.2.3.4',
    '1.2.3.4::',
    'ABCD::ef',
    '1:2:3:4:5:6:7',
    'a:b',
  ];
  for (const text of cases) t.is(parseIp(text)?.family ?? 0, isIP(text), text);
  t.is(parseIp('fe80::1%eth0'), undefined, 'a zone is no pool address');
});

test('prefixes: canonical, strict, containment', (t) => {
  t.is(formatPrefix(parsePrefix('10.1.2.3/16') ?? { family: 4, base: 0n, length: 0 }), '10.1.0.0/16');
  t.is(parsePrefix('10.1.2.3/16', true), undefined);
  t.is(parsePrefix('10.0.0.0/33'), undefined);
  t.is(parsePrefix('fd00::/129'), undefined);
  const pool = parsePrefix('10.244.0.0/16');
  const block = parsePrefix('10.244.3.64/26');
  if (!pool || !block) throw new Error('parse');
  t.true(within(block, pool));
  t.false(within(pool, block));
});

test('a block hands out in order and takes released addresses back at the end', (t) => {
  const block = newBlock('10.0.0.0/30', 'host:n1', new Date(0));
  const attribute = (handle: string) => ({ handle_id: handle, secondary: { node: 'n1' } });
  t.is(assignNext(block, attribute('a')), 0);
  t.is(assignNext(block, attribute('b')), 1);
  t.is(assignNext(block, attribute('a')), 2);
  t.deepEqual(ordinalsOf(block, 'a'), [0, 2]);
  t.is(block.attributes.length, 2, 'identical attributes stored once');
  releaseOrdinals(block, ordinalsOf(block, 'a'));
  t.deepEqual(block.unallocated, [3, 0, 2], 'released ordinals go to the back');
  t.deepEqual(block.attributes, [attribute('b')], 'unused attributes dropped');
  t.is(addressOf(block, 1), '10.0.0.1');
  t.is(allocatedCount(block), 1);
  t.false(assignOrdinal(block, 1, attribute('c')), 'a held ordinal cannot be taken');
  t.true(assignOrdinal(block, 2, attribute('c')));
  t.deepEqual(block.unallocated, [3, 0]);
  t.is(ordinalOf(block, '10.0.0.3'), 3);
  t.is(ordinalOf(block, '10.0.0.4'), undefined);
});

test('keys follow the reference layout', (t) => {
  t.is(keys.block('10.244.0.64/26'), '/netplug/ipam/v2/assignment/ipv4/block/10.244.0.64-26');
  t.is(keys.affinity('node-1', 'fd00:1::/122'), '/netplug/ipam/v2/host/node-1/ipv6/block/fd00:1::-122');
  t.is(cidrOfKey(keys.block('fd00:1::/122')), 'fd00:1::/122');
  t.is(keys.handle('k8s-pod-network.abc'), '/netplug/ipam/v2/handle/k8s-pod-network.abc');
});

test("a pool document: the reference's defaults for fields left out; a wrong field named with its value", (t) => {
  const entry = (value: unknown) => ({ key: keys.pool('p'), value, revision: '1' });
  const minimal = {
    kind: 'IPPool',
    apiVersion: 'projectnet.org/v3',
    metadata: { name: 'p' },
    spec: { cidr: '10.0.0.0/16', blockSize: 26 },
  };
  t.like(checkedPool(entry(minimal)).value.spec, {
    nodeSelector: 'all()',
    ipipMode: 'Never',
    vxlanMode: 'Never',
    natOutgoing: false,
    disabled: false,
  });
  const error = t.throws(() => checkedPool(entry({ ...minimal, spec: { cidr: 'fd00::/48', blockSize: 64 } })), { instanceOf: IpamError });
  t.is(error?.code, 7);
  t.is(
    error?.message,
    'the datastore\'s IPPool "p" (key /netplug/resources/v3/projectnet.org/ippools/p) is broken: field "spec.blockSize" must be a whole number from 116 to 128 (for fd00::/48), got 64; repair or remove it',
  );
  t.throws(() => checkedPool(entry({ ...minimal, spec: { ...minimal.spec, cidr: 'x'.repeat(10_000) } })), {
    message: /got "x{63}\.\.\. \(10002 characters\); repair/,
  });
});

test('a block document must agree with its key and its CIDR; a handle must count addresses per block CIDR', (t) => {
  const key = keys.block('10.0.0.0/30');
  const block = newBlock('10.0.0.0/30', 'host:n1', new Date(0));
  t.deepEqual(checkedBlock({ key, value: block, revision: '1' }).value, block);
  const { deleted: _, sequenceNumber: __, ...older } = block;
  t.like(checkedBlock({ key, value: older, revision: '1' }).value, { deleted: false, sequenceNumber: 0 }, 'fields left out get defaults');
  t.throws(() => checkedBlock({ key, value: { ...block, allocations: [null, null] }, revision: '1' }), {
    message: /IPAMBlock "10\.0\.0\.0-30" .* field "allocations" must be a list of 4 entries/,
  });
  t.throws(() => checkedBlock({ key, value: { ...block, cidr: '10.0.0.0/8' }, revision: '1' }), {
    message: /field "cidr" must be the CIDR its key names, 10\.0\.0\.0\/30, got "10\.0\.0\.0\/8"/,
  });
  t.throws(() => checkedBlock({ key: keys.block('10.0.0.0/8'), value: { ...block, cidr: '10.0.0.0/8' }, revision: '1' }), {
    message: /must be a block of at most 4096 addresses/,
  });
  t.throws(() => cidrOfKey(`${keys.affinities('n1', 4)}nope`), {
    message: /BlockAffinity "n1\/ipv4\/block\/nope" .* its key must end in a block CIDR/,
  });
  const handle = { handleID: 'n.c', block: { '10.0.0.0/30': 1 } };
  t.like(checkedHandle({ key: keys.handle('n.c'), value: handle, revision: '1' }).value, { deleted: false });
  t.throws(() => checkedHandle({ key: keys.handle('n.c'), value: { ...handle, block: { '10.0.0.0/30': -1 } }, revision: '1' }), {
    message: /field "block\["10\.0\.0\.0\/30"\]" must be a count of addresses, got -1/,
  });
  t.true(isPendingRequest({ handle: 'h', attributes: {}, requests: [{ family: 4, pools: ['p'] }], created: '2026-01-01T00:00:00Z' }));
  t.false(isPendingRequest({ handle: 'h', attributes: {}, requests: [{ family: 5, pools: ['p'] }], created: '2026-01-01T00:00:00Z' }));
  t.false(isPendingRequest({ handle: 'h', requests: 'all' }));
});

test('pool update flags: checked before anything is read', (t) => {
  t.deepEqual(poolChanges({ disable: true, 'nat-outgoing': 'false', 'vxlan-mode': 'Always' }), {
    disabled: true,
    natOutgoing: false,
    vxlanMode: 'Always',
  });
  t.deepEqual(poolChanges({ enable: true, 'node-selector': 'has(zone)' }), { disabled: false, nodeSelector: 'has(zone)' });
  t.throws(() => poolChanges({}), { message: /needs at least one of/ });
  t.throws(() => poolChanges({ disable: true, enable: true }), { message: /not both/ });
  t.throws(() => poolChanges({ 'ipip-mode': 'Always', 'vxlan-mode': 'CrossSubnet' }), { message: /cannot both be enabled/ });
  t.throws(() => poolChanges({ 'node-selector': '!!' }), { message: /^--node-selector: selector "!!"/ });
});
