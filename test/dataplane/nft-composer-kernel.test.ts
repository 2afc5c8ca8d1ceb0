// The composer's element updates against the kernel, each test in a namespace of its own (the
// calls run in a child process under `ip netns exec`: nft-composer-in-netns.ts): a policy part
// changed by elements alone, then by a chain, then the nat part, leaves the kernel's table listing
// exactly as the composer's table rendered and loaded by `nft -f` in another namespace, so an
// element batch is neither lost nor undone by the whole writes after it.
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

import test from 'ava';

import type { ElementChanges, Table, TablePart } from '../../ts/nft/model.ts';
import { renderTable } from '../../ts/nft/render.ts';
import { createNetns, nftBinary, type TestNetns } from '../helpers/kernel.ts';

const CHILD = fileURLToPath(new URL('./nft-composer-in-netns.ts', import.meta.url));

interface Outcome {
  value?: unknown;
  error?: { message: string };
}

function inNetns(netns: TestNetns, ...calls: unknown[][]): Outcome[] {
  const out = execFileSync('ip', ['netns', 'exec', netns.name, process.execPath, CHILD, JSON.stringify(calls)], { encoding: 'utf8' });
  return JSON.parse(out) as Outcome[];
}

function listed(netns: TestNetns): string {
  return execFileSync('ip', ['netns', 'exec', netns.name, nftBinary(), 'list', 'table', 'inet', 'netplug'], { encoding: 'utf8' });
}

/** The kernel's listing of `table` written by nft from its rendered text, in a fresh namespace. */
function listedRendered(t: Parameters<typeof createNetns>[0], table: Table): string {
  const loaded = createNetns(t, 'cmpl');
  execFileSync('ip', ['netns', 'exec', loaded.name, nftBinary(), '-f', '-'], { encoding: 'utf8', input: renderTable(table) });
  return listed(loaded);
}

const nat = (priority: number): TablePart => ({
  chains: [{ name: 'nat-outgoing', base: { type: 'nat', hook: 'postrouting', priority }, rules: [{ statements: [{ masquerade: {} }] }] }],
});

function policy(peers: string[], endpoints: string[]): TablePart {
  return {
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
          { matches: [{ key: 'ip saddr' as const, value: { set: 'web-peers' } }], verdict: 'accept' as const },
          { verdict: 'drop' as const },
        ],
      })),
    ],
  };
}

test('element updates, then a chain change, then the nat part: the kernel lists as the composed table rendered', (t) => {
  const netns = createNetns(t, 'cmp');
  // Two endpoints' chains exist from the start; the map's entry for b comes by an element update.
  const first = policy(['10.0.0.0/24'], ['a', 'b']);
  first.maps = [{ ...first.maps?.[0], name: 'to-wl', type: 'ifname', elements: [{ key: 'npta', verdict: { goto: 'tw-a' } }] }];
  const second = policy(['10.0.0.0/24', '10.1.0.0/16'], ['a', 'b']);
  const toSecond: ElementChanges = {
    sets: [{ name: 'web-peers', add: ['10.1.0.0/16'] }],
    maps: [{ name: 'to-wl', add: [{ key: 'nptb', verdict: { goto: 'tw-b' } }] }],
  };
  const third = policy(['10.1.0.0/16', '192.168.7.7'], ['a', 'b']);
  const toThird: ElementChanges = { sets: [{ name: 'web-peers', add: ['192.168.7.7'], delete: ['10.0.0.0/24'] }] };
  // A chain change: endpoint c's chain and entry (elements as the last update left them).
  const fourth = policy(['10.1.0.0/16', '192.168.7.7'], ['a', 'b', 'c']);

  const outcomes = inNetns(
    netns,
    ['setPart', 'nat', nat(100)],
    ['setPart', 'policy', first],
    ['updatePart', 'policy', second, toSecond],
    ['updatePart', 'policy', third, toThird],
    ['table'],
  );
  t.deepEqual(
    outcomes.map((o) => o.error?.message ?? o.value),
    ['waiting', 'applied', 'applied', 'applied', outcomes[4]?.value],
  );
  const afterElements = outcomes[4]?.value as Table;
  t.deepEqual(afterElements.sets?.[0]?.elements, ['10.1.0.0/16', '192.168.7.7'], 'the composer records the part given with its elements');
  t.is(listed(netns), listedRendered(t, afterElements), 'after element updates');

  // A fresh composer (a restarted agent) writes over what it finds: the same steps, then a chain
  // change and a nat change, each a whole write of the composed table.
  const [, , , , chain, natChanged, table] = inNetns(
    netns,
    ['setPart', 'nat', nat(100)],
    ['setPart', 'policy', first],
    ['updatePart', 'policy', second, toSecond],
    ['updatePart', 'policy', third, toThird],
    ['setPart', 'policy', fourth],
    ['setPart', 'nat', nat(110)],
    ['table'],
  );
  t.is(chain?.value, 'applied');
  t.is(natChanged?.value, 'applied');
  const composed = table?.value as Table;
  t.deepEqual(composed.sets?.[0]?.elements, ['10.1.0.0/16', '192.168.7.7']);
  const text = listed(netns);
  t.is(text, listedRendered(t, composed), 'after a chain change and a nat change');
  t.regex(text, /"nptc" : goto tw-c/);
  t.regex(text, /elements = \{ 10\.1\.0\.0\/16, 192\.168\.7\.7 \}/);
});

test('an element update refused leaves the next write whole, and the kernel as the composed table', (t) => {
  const netns = createNetns(t, 'cmp');
  const first = policy(['10.0.0.0/24'], ['a']);
  // Elements of a set the table has not: the writer refuses the batch.
  const wrong: ElementChanges = { sets: [{ name: 'no-such-set', add: ['10.200.0.0/16'] }] };
  const [, , refused, whole, table] = inNetns(
    netns,
    ['setPart', 'nat', nat(100)],
    ['setPart', 'policy', first],
    ['updatePart', 'policy', policy(['10.0.0.0/24'], ['a']), wrong],
    ['updatePart', 'policy', policy(['10.0.0.0/24', '10.3.0.0/16'], ['a']), { sets: [{ name: 'web-peers', add: ['10.3.0.0/16'] }] }],
    ['table'],
  );
  t.truthy(refused?.error, 'the refused batch rejects');
  t.is(whole?.value, 'applied');
  t.is(listed(netns), listedRendered(t, table?.value as Table));
});

test('differences: chains, sets, maps and counters added, changed and removed leave the kernel as the composed table; a hand change makes the next write, or a repair’s check, whole', (t) => {
  const netns = createNetns(t, 'cmp');
  const base = policy(['10.0.0.0/24'], ['a', 'b']);
  // A new endpoint (chain, map entry), a set added with a rule using it, a counter added.
  const grown: TablePart = {
    ...policy(['10.0.0.0/24', '10.9.0.0/16'], ['a', 'b', 'c']),
    counters: ['fail-closed', 'denied-web'],
  };
  grown.sets?.push({ name: 'db-ports', type: 'inet_service', flags: ['interval'], elements: [5432, '6000-6010'] });
  grown.chains?.push({
    name: 'pi-db',
    rules: [
      { matches: [{ key: 'th dport', value: { set: 'db-ports' } }], statements: [{ counter: { name: 'denied-web' } }], verdict: 'drop' },
    ],
  });
  // Endpoint a gone, b's entry sent to another chain, the new set's elements changed, c's chain rewritten.
  const shrunk = policy(['10.9.0.0/16'], ['b', 'c']);
  const toWl = shrunk.maps?.[0];
  if (toWl?.elements?.[0]) toWl.elements[0] = { key: 'nptb', verdict: { goto: 'tw-c' } };
  shrunk.sets?.push({ name: 'db-ports', type: 'inet_service', flags: ['interval'], elements: [5432, 7000] });
  shrunk.chains?.push({ name: 'pi-db', rules: [{ matches: [{ key: 'th dport', value: { set: 'db-ports' } }], verdict: 'accept' }] });
  const cChain = shrunk.chains?.find((c) => c.name === 'tw-c');
  if (cChain) cChain.rules = [{ verdict: 'accept' }];
  // The set and its chain gone again, the counter with them.
  const back = policy(['10.9.0.0/16'], ['b', 'c']);

  const steps: [string, TablePart][] = [
    ['grown', grown],
    ['shrunk', shrunk],
    ['back', back],
  ];
  const calls: unknown[][] = [
    ['setPart', 'nat', nat(100)],
    ['setPart', 'policy', base],
  ];
  for (const [, part] of steps) calls.push(['setPart', 'policy', part], ['table']);
  calls.push(['writes']);
  const outcomes = inNetns(netns, ...calls);
  t.deepEqual(
    outcomes.pop()?.value,
    { whole: 1, delta: 3, deltaRefused: 0, elements: 0 },
    'the first write whole, each step after it a difference',
  );
  t.deepEqual(
    outcomes.filter((_, i) => i === 1 || (i >= 2 && i % 2 === 0)).map((o) => o.error?.message ?? o.value),
    ['applied', 'applied', 'applied', 'applied'],
  );
  const last = outcomes.at(-1)?.value as Table;
  t.is(listed(netns), listedRendered(t, last), 'after the differences');

  // Someone adds a chain by hand: the writer refuses the next difference, and the write goes whole.
  const [, , hand, afterHand, table, writes, , unchanged, verified, , verifiedWrites] = inNetns(
    netns,
    ['setPart', 'nat', nat(100)],
    ['setPart', 'policy', back],
    ['nft', 'add', 'chain', 'inet', 'netplug', 'by-hand'],
    ['setPart', 'policy', grown],
    ['table'],
    ['writes'],
    // Another hand change: the same part given again writes nothing, unless asked to verify.
    ['nft', 'add', 'chain', 'inet', 'netplug', 'by-hand-again'],
    ['setPart', 'policy', grown],
    ['setPart', 'policy', grown, { verify: true }],
    ['table'],
    ['writes'],
  );
  t.deepEqual(writes?.value, { whole: 2, delta: 0, deltaRefused: 1, elements: 0 }, 'the difference refused, then written whole');
  t.is(hand?.value, 'done');
  t.is(afterHand?.value, 'applied');
  t.deepEqual([unchanged?.value, verified?.value], ['applied', 'applied']);
  t.deepEqual(verifiedWrites?.value, { whole: 3, delta: 0, deltaRefused: 2, elements: 0 }, 'the check found the change: written whole');
  const text = listed(netns);
  t.is(text, listedRendered(t, table?.value as Table), 'after hand changes');
  t.notRegex(text, /by-hand/);
});
