// netplug's nftables table through the TypeScript facade and the built addon, each test in a
// namespace of its own: the calls act on the calling process's namespace, so they run in a child
// process under `ip netns exec` (nftables-in-netns.ts). The kernel is read back with `nft`, an
// observer independent of the code under test.
//
// The renderer is checked against the kernel too: its text for each golden case of
// crates/netplug-nftables (every construct of the vocabulary), loaded with `nft -f` in one
// namespace, lists exactly as the table the writer wrote from the same description in another
// (`nft list table` text equal line for line).
import { execFileSync, spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

import test, { type ExecutionContext } from 'ava';

import type { Table } from '../../ts/nft/model.ts';
import { renderTable } from '../../ts/nft/render.ts';
import { createNetns, nftBinary, type TestNetns } from '../helpers/kernel.ts';

const CHILD = fileURLToPath(new URL('./nftables-in-netns.ts', import.meta.url));
const CASES = fileURLToPath(new URL('../../crates/netplug-nftables/tests/golden/cases.json', import.meta.url));

interface Outcome {
  value?: unknown;
  error?: { name: string; code?: string; op?: string; message: string };
}

function inNetns(netns: TestNetns, ...calls: unknown[][]): Outcome[] {
  const out = execFileSync('ip', ['netns', 'exec', netns.name, process.execPath, CHILD, JSON.stringify(calls)], { encoding: 'utf8' });
  return JSON.parse(out) as Outcome[];
}

function value<T>(netns: TestNetns, call: unknown[]): T {
  const [outcome] = inNetns(netns, call);
  if (outcome?.error) throw new Error(`${String(call[0])}: ${outcome.error.message}`);
  return outcome?.value as T;
}

function nft(netns: TestNetns, args: string[], input?: string): string {
  return execFileSync('ip', ['netns', 'exec', netns.name, nftBinary(), ...args], { encoding: 'utf8', ...(input ? { input } : {}) });
}

/** The kernel's table, rule lines only (`nft list table`). */
function listed(netns: TestNetns): string {
  return nft(netns, ['list', 'table', 'inet', 'netplug']);
}

function policyTable(peers: string[], endpoints: string[]): Table {
  return {
    family: 'inet',
    name: 'netplug',
    counters: ['fail-closed'],
    sets: [{ name: 'web-peers', type: 'ipv4_addr', flags: ['interval'], elements: peers }],
    maps: [{ name: 'to-wl', type: 'ifname', elements: endpoints.map((e) => ({ key: `npt${e}`, verdict: { goto: `tw-${e}` } })) }],
    chains: [
      {
        name: 'forward',
        base: { type: 'filter', hook: 'forward', priority: 10 },
        rules: [
          { verdict: { vmap: { key: 'oifname', map: 'to-wl' } } },
          { matches: [{ key: 'oifname', value: 'npt*' }], statements: [{ counter: { name: 'fail-closed' } }], verdict: 'drop' },
        ],
      },
      ...endpoints.map((e) => ({
        name: `tw-${e}`,
        rules: [
          {
            matches: [
              { key: 'ip saddr' as const, value: { set: 'web-peers' } },
              { key: 'th dport' as const, value: [80, 443] },
            ],
            verdict: 'accept' as const,
            comment: `endpoint ${e}`,
          },
          { verdict: 'drop' as const },
        ],
      })),
    ],
  };
}

test('the facade writes a table, then its differences and element updates; reads counters; removes it', (t) => {
  const netns = createNetns(t, 'nft');
  const first = policyTable(['10.0.0.0/24'], ['a', 'b']);
  const second = policyTable(['10.0.0.0/24', '10.9.0.0/16'], ['a', 'c']);
  const [applied, changed, same, updated, counters, removed, again] = inNetns(
    netns,
    ['apply', first],
    ['apply', second],
    ['apply', second],
    ['updateElements', { sets: [{ name: 'web-peers', add: ['192.168.0.0/16'], delete: ['10.9.0.0/16'] }] }],
    ['counters'],
    ['remove'],
    ['remove'],
  );
  t.like(applied?.value, { replaced: true });
  t.like(changed?.value, { replaced: false });
  t.like(same?.value, { replaced: false, operations: 0 });
  t.like(updated?.value, { replaced: false, operations: 2 });
  t.deepEqual(counters?.value, { 'fail-closed': { packets: 0, bytes: 0 } });
  t.is(removed?.value, true);
  t.is(again?.value, false);
  t.not(spawnSync('ip', ['netns', 'exec', netns.name, nftBinary(), 'list', 'table', 'inet', 'netplug']).status, 0);
});

test('the kernel holds what the facade wrote, element updates included', (t) => {
  const netns = createNetns(t, 'nft');
  value(netns, ['apply', policyTable(['10.0.0.0/24'], ['a'])]);
  const [updated] = inNetns(
    netns,
    ['apply', policyTable(['10.0.0.0/24'], ['a'])],
    [
      'updateElements',
      { sets: [{ name: 'web-peers', add: ['10.1.0.0/16'] }], maps: [{ name: 'to-wl', add: [{ key: 'nptz', verdict: 'drop' }] }] },
    ],
  );
  t.falsy(updated?.error);
  const text = listed(netns);
  t.regex(text, /elements = \{ 10\.0\.0\.0\/24, 10\.1\.0\.0\/16 \}/, 'a fresh process wrote the table whole, then the update');
  t.regex(text, /"nptz" : drop/);
  t.regex(text, /ip saddr @web-peers th dport \{ 80, 443 \} accept comment "endpoint a"/);
});

test('a refused description is a DataplaneError naming the rule, and the table stays as it was', (t) => {
  const netns = createNetns(t, 'nft');
  const good = policyTable(['10.0.0.0/24'], ['a']);
  const bad: Table = {
    ...good,
    chains: [
      ...(good.chains ?? []),
      {
        name: 'oops',
        base: { type: 'filter', hook: 'input', priority: 0 },
        rules: [{ statements: [{ masquerade: {} }], comment: 'not here' }],
      },
    ],
  };
  const [, refused, invalid] = inNetns(netns, ['apply', good], ['apply', bad], ['apply', { ...good, chains: [{ name: '-bad name' }] }]);
  t.is(refused?.error?.name, 'DataplaneError');
  t.is(refused?.error?.code, 'EOPNOTSUPP');
  t.regex(refused?.error?.message ?? '', /rule 1 of chain "oops" \(comment "not here"\)/);
  t.is(invalid?.error?.code, 'EINVAL');
  t.regex(invalid?.error?.message ?? '', /chain name "-bad name"/);
  t.notRegex(listed(netns), /oops/);
});

test('rendered text, loaded by nft, lists exactly as the table the writer writes (every construct)', (t) => {
  const cases = JSON.parse(readFileSync(CASES, 'utf8')) as { name: string; table: Table }[];
  t.true(cases.length >= 10);
  for (const { name, table } of cases) {
    const written = createNetns(t, 'nftw');
    const loaded = createNetns(t, 'nftl');
    value(written, ['apply', table]);
    const text = renderTable(table);
    try {
      nft(loaded, ['-f', '-'], text);
    } catch (err) {
      t.fail(`case ${name}: nft refused the rendered text:\n${text}\n${(err as Error).message}`);
      continue;
    }
    t.is(listed(loaded), listed(written), `case ${name}; rendered:\n${text}`);
  }
});

test('NFLOG through the facade: logged packets arrive with their prefix, addresses, protocol and length', (t) => {
  const netns = createNetns(t, 'nft');
  execFileSync('ip', ['netns', 'exec', netns.name, 'ip', 'link', 'set', 'lo', 'up']);
  const table: Table = {
    family: 'inet',
    name: 'netplug',
    counters: ['logged'],
    chains: [
      {
        name: 'output',
        base: { type: 'filter', hook: 'output', priority: 0 },
        rules: [
          {
            matches: [
              { key: 'ip daddr', value: '127.0.0.9' },
              { key: 'icmp type', value: 'echo-request' },
            ],
            statements: [{ counter: { name: 'logged' } }, { log: { prefix: 'np-test: ', group: 9 } }],
          },
        ],
      },
    ],
  };
  const [, logged, counters] = inNetns(
    netns,
    ['apply', table],
    ['nflog', 9, ['ping', '-c', '3', '-i', '0.2', '127.0.0.9'], 3],
    ['counters'],
  );
  const packets = logged?.value as {
    prefix: string;
    family: number;
    protocol: number;
    source: string;
    destination: string;
    icmpType: number;
    outInterface?: string;
    length: number;
  }[];
  t.is(packets.length, 3, JSON.stringify(logged));
  // ping's echo requests: 20 bytes of IPv4 header, 8 of ICMP, 56 of data.
  for (const packet of packets)
    t.like(packet, { prefix: 'np-test: ', family: 4, protocol: 1, destination: '127.0.0.9', icmpType: 8, outInterface: 'lo', length: 84 });
  t.like(counters?.value, { logged: { packets: 3 } });
});

void ({} as ExecutionContext);
