// The nft text renderer (pure): each construct as `nft -f` reads it. That nft accepts the text and
// lists back the table the writer writes is shown against the kernel in
// test/dataplane/nftables.test.ts.
import test from 'ava';

import { inSet, match, notMatch, rule, unionOf } from '../../ts/nft/build.ts';
import type { Table } from '../../ts/nft/model.ts';
import { renderRule, renderTable } from '../../ts/nft/render.ts';

test('rules render as nft writes them', (t) => {
  t.is(
    renderRule(rule([match('ip saddr', '10.0.0.0/8'), match('th dport', [80, 443, '1000-2000'])], 'accept', 'policy ns/web')),
    'ip saddr 10.0.0.0/8 th dport { 80, 443, 1000-2000 } accept comment "policy ns/web"',
  );
  t.is(renderRule(rule([notMatch('iifname', 'cali*')], 'drop')), 'iifname != "cali*" drop');
  t.is(
    renderRule(rule([match(['ip daddr', 'meta l4proto', 'th dport'], inSet('named-ports'))], { goto: 'pi-a' })),
    'ip daddr . meta l4proto . th dport @named-ports goto pi-a',
  );
  t.is(renderRule(rule([match('ct state', ['established', 'related'])], 'accept')), 'ct state established,related accept');
  t.is(
    renderRule({ matches: [{ key: 'meta mark', mask: 0xffff0000, value: 0x10000 }], verdict: 'return' }),
    'meta mark & 0xffff0000 == 0x10000 return',
  );
  t.is(
    renderRule({ statements: [{ limit: { rate: 10, per: 'second' } }, { log: { prefix: 'deny: ', group: 1 } }] }),
    'limit rate 10/second burst 5 packets log prefix "deny: " group 1',
  );
  t.is(
    renderRule({
      statements: [{ mark: { clear: 0x10000 } }, { counter: { name: 'c' } }],
      verdict: { vmap: { key: 'oifname', map: 'to-wl' } },
    }),
    'meta mark set meta mark & 0xfffeffff counter name "c" oifname vmap @to-wl',
  );
  t.is(renderRule({ statements: [{ masquerade: { fullyRandom: true } }] }), 'masquerade fully-random');
  t.is(renderRule({ statements: [{ dnat: { to: '10.244.0.5' } }] }), 'dnat ip to 10.244.0.5');
  t.is(renderRule({ statements: [{ dnat: { to: 'fd00::5' } }] }), 'dnat ip6 to fd00::5');
  t.is(renderRule({ statements: [{ snat: { to: '10.250.0.1' } }] }), 'snat ip to 10.250.0.1');
});

test('a table renders its counters, sets, maps and chains', (t) => {
  const table: Table = {
    family: 'inet',
    name: 'netplug',
    counters: ['c1'],
    sets: [{ name: 'np', type: ['ipv4_addr', 'inet_proto', 'inet_service'], elements: [['10.1.1.1', 'tcp', 80]] }],
    maps: [{ name: 'to-wl', type: 'ifname', elements: [{ key: 'cali1', verdict: { goto: 'tw-a' } }] }],
    chains: [
      { name: 'tw-a' },
      { name: 'forward', base: { type: 'filter', hook: 'forward', priority: 10 }, rules: [{ verdict: 'accept' }] },
    ],
  };
  t.is(
    renderTable(table),
    [
      'table inet netplug {',
      '\tcounter c1 {',
      '\t}',
      '',
      '\tset np {',
      '\t\ttype ipv4_addr . inet_proto . inet_service',
      '\t\telements = { 10.1.1.1 . tcp . 80 }',
      '\t}',
      '',
      '\tmap to-wl {',
      '\t\ttype ifname : verdict',
      '\t\telements = { "cali1" : goto tw-a }',
      '\t}',
      '',
      '\tchain tw-a {',
      '\t}',
      '',
      '\tchain forward {',
      '\t\ttype filter hook forward priority 10; policy accept;',
      '\t\taccept',
      '\t}',
      '}',
      '',
    ].join('\n'),
  );
});

test('the union of parts keeps each part and refuses a name two parts claim', (t) => {
  const parts = new Map([
    ['nat', { chains: [{ name: 'nat-outgoing' }] }],
    ['policy', { chains: [{ name: 'forward' }], sets: [{ name: 'peers', type: 'ipv4_addr' as const }], counters: ['denied'] }],
  ]);
  t.deepEqual(unionOf('inet', 'netplug', parts), {
    family: 'inet',
    name: 'netplug',
    chains: [{ name: 'nat-outgoing' }, { name: 'forward' }],
    sets: [{ name: 'peers', type: 'ipv4_addr' }],
    maps: [],
    counters: ['denied'],
  });
  parts.set('dns', { maps: [{ name: 'peers', type: 'ifname' }] } as never);
  t.throws(() => unionOf('inet', 'netplug', parts), { message: 'table inet netplug: set or map "peers" is both policy\'s and dns\'s' });
});
