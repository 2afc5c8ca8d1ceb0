// A writer that keeps its last commit in a file (what netplug-node does beside its CNI socket):
// the next run's first apply takes over the kernel's table and writes only the difference, and
// the kernel then holds exactly what a whole write would have made; the file is gone once a commit
// changed the table. The file is not trusted for a table someone else changed, deleted and made
// again, in another network namespace, or when it does not parse: the table is written whole.
import { execFileSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

import test from 'ava';

import type { Table } from '../../ts/nft/model.ts';
import { tempDir } from '../helpers/cni.ts';
import { createNetns, nftBinary, type TestNetns } from '../helpers/kernel.ts';

const CHILD = fileURLToPath(new URL('./nftables-in-netns.ts', import.meta.url));

interface Outcome {
  value?: unknown;
  error?: { message: string };
}

/** One run of a writer (a process of its own) in `netns`, keeping its commits in `kept`. */
function run(netns: TestNetns, kept: string | undefined, ...calls: unknown[][]): unknown[] {
  const args = [CHILD, JSON.stringify(calls), ...(kept ? [kept] : [])];
  const out = execFileSync('ip', ['netns', 'exec', netns.name, process.execPath, ...args], { encoding: 'utf8' });
  return (JSON.parse(out) as Outcome[]).map((outcome, i) => {
    if (outcome.error) throw new Error(`${String(calls[i]?.[0])}: ${outcome.error.message}`);
    return outcome.value;
  });
}

const nft = (netns: TestNetns, ...args: string[]) =>
  execFileSync('ip', ['netns', 'exec', netns.name, nftBinary(), ...args], { encoding: 'utf8' });
const listed = (netns: TestNetns) => nft(netns, 'list', 'table', 'inet', 'netplug');

/** A table of `pods` endpoint chains, each allowing the peers set, with a dispatch map. */
function table(pods: string[], peers: string[]): Table {
  return {
    family: 'inet',
    name: 'netplug',
    sets: [{ name: 'peers', type: 'ipv4_addr', flags: ['interval'], elements: peers }],
    maps: [{ name: 'to-wl', type: 'ifname', elements: pods.map((p) => ({ key: `npt${p}`, verdict: { goto: `tw-${p}` } })) }],
    chains: [
      {
        name: 'forward',
        base: { type: 'filter', hook: 'forward', priority: 10 },
        rules: [{ verdict: { vmap: { key: 'oifname', map: 'to-wl' } } }],
      },
      ...pods.map((p) => ({
        name: `tw-${p}`,
        rules: [
          {
            matches: [
              { key: 'ip saddr' as const, value: { set: 'peers' } },
              { key: 'th dport' as const, value: 80 },
            ],
            verdict: 'accept' as const,
          },
          { verdict: 'drop' as const },
        ],
      })),
    ],
  };
}

const pods = Array.from({ length: 50 }, (_, i) => `p${i}`);
const before = table(pods, ['10.0.0.0/24']);
const after = table([...pods.slice(1), 'new'], ['10.0.0.0/24', '10.1.0.5']);

/** What a whole write of `description` makes, as nft lists it. */
function wholeListing(t: Parameters<typeof createNetns>[0], description: Table): string {
  const fresh = createNetns(t, 'kept');
  run(fresh, undefined, ['apply', description]);
  return listed(fresh);
}

test('a restarted writer takes over the table its previous run kept and writes only the difference', (t) => {
  const netns = createNetns(t, 'kept');
  const kept = join(tempDir(t, 'kept'), 'nftables', 'inet-netplug.json');
  const [first, keep] = run(netns, kept, ['apply', before], ['keep']) as [{ replaced: boolean; operations: number }, boolean];
  t.true(first.replaced);
  t.true(keep);
  t.true(existsSync(kept));

  const [second] = run(netns, kept, ['apply', after]) as [{ replaced: boolean; operations: number }];
  t.false(second.replaced, 'taken over');
  t.true(second.operations > 0 && second.operations < first.operations / 4, `${second.operations} messages, not ${first.operations}`);
  t.false(existsSync(kept), 'the file is gone once the table changed');
  t.is(listed(netns), wholeListing(t, after), 'the kernel holds what a whole write makes');

  // Without a file kept, the next run writes whole.
  const [third] = run(netns, kept, ['apply', after]) as [{ replaced: boolean }];
  t.true(third.replaced);
});

test('a kept file is not trusted for a table changed by someone else, made again, in another namespace, or unreadable', (t) => {
  const dir = tempDir(t, 'kept');
  const keptIn = (name: string) => join(dir, name, 'inet-netplug.json');
  const cases: [string, (netns: TestNetns, kept: string) => void][] = [
    ['a chain added by someone else', (netns) => nft(netns, 'add', 'chain', 'inet', 'netplug', 'extra')],
    [
      'the table deleted and made again, the same',
      (netns) => {
        nft(netns, 'delete', 'table', 'inet', 'netplug');
        run(netns, undefined, ['apply', before]);
      },
    ],
    ['a file that does not parse', (_, kept) => writeFileSync(kept, '{"encoder": ')],
  ];
  for (const [what, change] of cases) {
    const netns = createNetns(t, 'kept');
    const kept = keptIn(what.replace(/\W+/g, '-'));
    run(netns, kept, ['apply', before], ['keep']);
    change(netns, kept);
    const [again] = run(netns, kept, ['apply', after]) as [{ replaced: boolean }];
    t.true(again.replaced, `${what}: written whole`);
    t.is(listed(netns), wholeListing(t, after), `${what}: the kernel holds the description`);
  }

  // Another namespace holding the same table, with the first one's file.
  const one = createNetns(t, 'kept');
  const other = createNetns(t, 'kept');
  const kept = keptIn('one');
  run(one, kept, ['apply', before], ['keep']);
  run(other, undefined, ['apply', before]);
  const copied = keptIn('other');
  mkdirSync(join(copied, '..'), { recursive: true });
  copyFileSync(kept, copied);
  const [there] = run(other, copied, ['apply', after]) as [{ replaced: boolean }];
  t.true(there.replaced, 'another namespace: written whole');
});
