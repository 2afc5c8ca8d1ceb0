// The compiled policy part in the kernel: netplug's writer loads generated worlds' parts (every
// construct the compiler writes: dispatch maps, interval and concatenated sets, marks with masks,
// named counters, log groups, ICMP matches), then element changes as the engine yields them; after
// each, the kernel's table lists exactly as the same part rendered to `nft -f` text and loaded by
// nft into another namespace.
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

import test from 'ava';

import { renderTable } from '../../ts/nft/render.ts';
import type { TablePart } from '../../ts/nft/model.ts';
import { createNetns, nftBinary, type TestNetns } from '../helpers/kernel.ts';
import { generateWorld } from './generate.ts';
import { endpointOf, engineFor } from './harness.ts';

const CHILD = fileURLToPath(new URL('../dataplane/nftables-in-netns.ts', import.meta.url));

function inNetns(netns: TestNetns, ...calls: unknown[][]): { value?: unknown; error?: { message: string } }[] {
  const out = execFileSync('ip', ['netns', 'exec', netns.name, process.execPath, CHILD, JSON.stringify(calls)], { encoding: 'utf8' });
  return JSON.parse(out);
}

const nft = (netns: TestNetns, args: string[], input?: string) =>
  execFileSync('ip', ['netns', 'exec', netns.name, nftBinary(), ...args], { encoding: 'utf8', ...(input ? { input } : {}) });

/**
 * A listing's sets and maps (whole, elements included) and its chains (name and number of rules):
 * nft orders a rule's matches its own way when it reads text, so rules are compared by count (the
 * encoding of each construct is the writer's golden tests').
 */
function summary(listing: string) {
  const blocks = listing.split(/\n\t(?=(?:set|map|chain|counter) )/).slice(1);
  return {
    sets: blocks.filter((b) => b.startsWith('set ') || b.startsWith('map ')).map((b) => b.replace(/\s+/g, ' ').trim()),
    chains: blocks.filter((b) => b.startsWith('chain ')).map((b) => `${b.split(' ')[1]}: ${b.split('\n').length - 2} lines`),
    counters: blocks.filter((b) => b.startsWith('counter ')).map((b) => b.split(' ')[1]),
  };
}

/** The table as nft lists it after loading the part's rendering. */
function rendered(netns: TestNetns, part: TablePart): string {
  nft(netns, ['-f', '-'], `table inet netplug\ndelete table inet netplug\n${renderTable({ family: 'inet', name: 'netplug', ...part })}`);
  return nft(netns, ['list', 'table', 'inet', 'netplug']);
}

test('the writer loads compiled parts and their element changes: the kernel holds what the part says', (t) => {
  const [written, reference] = [createNetns(t, 'polw'), createNetns(t, 'polr')];
  const world = generateWorld(7, { kubernetesPolicies: 6, netplugPolicies: 6 });
  const { engine } = engineFor(world, 'node-1');
  const first = engine.part();
  t.true(
    (first.sets ?? []).some((s) => Array.isArray(s.type)),
    'a named-port set is among them',
  );
  const calls: unknown[][] = [['apply', { family: 'inet', name: 'netplug', ...first }]];
  // Pods come and go elsewhere: element changes only.
  const pods = world.cluster.pods.filter((pod) => pod.node !== 'node-1');
  for (const pod of pods.slice(0, 3)) engine.removeEndpoint(pod.key);
  for (const pod of pods.slice(0, 2))
    engine.upsertEndpoint(endpointOf({ ...pod, key: `${pod.key}-2`, ipv4: pod.ipv4.replace(/\.0\./, '.1.') }));
  const update = engine.flush();
  t.false(update.structural);
  t.truthy(update.elements.sets?.length);
  calls.push(['updateElements', update.elements]);
  const outcomes = inNetns(written, ...calls);
  t.deepEqual(
    outcomes.map((o) => o.error?.message),
    calls.map(() => undefined),
  );
  const [kernel, expected] = [nft(written, ['list', 'table', 'inet', 'netplug']), rendered(reference, engine.part())];
  t.deepEqual(summary(kernel), summary(expected));
  t.true(
    summary(kernel).sets.some((set) => set.includes('elements')),
    'sets hold elements',
  );
});

test('worlds of every seed load whole', (t) => {
  const netns = createNetns(t, 'polseed');
  for (let seed = 100; seed < 130; seed++) {
    const { engine } = engineFor(generateWorld(seed), 'node-1');
    const [outcome] = inNetns(netns, ['apply', { family: 'inet', name: 'netplug', ...engine.part() }]);
    t.is(outcome?.error?.message, undefined, `seed ${seed}`);
  }
});
