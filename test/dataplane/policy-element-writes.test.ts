// The policy pass through the composer (pure: a recording writer stands in for the kernel): a pod
// elsewhere joining a set a policy uses is written as element changes alone, a local pod's chains
// as a whole table, and after both the composer's table is the engine's part, so no later whole
// write undoes an element batch. Status files go by what was written between directory reads, and
// a file removed by hand comes back once the directory is read again.
import { existsSync, readdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';

import test from 'ava';
import { Registry } from 'prom-client';

import { NftComposer } from '../../ts/dataplane/nft-composer.ts';
import { Logger } from '../../ts/log/logger.ts';
import type { ElementChanges, Table } from '../../ts/nft/model.ts';
import type { EngineFeed, LocalPod } from '../../ts/node/policy/feed-engine.ts';
import { PolicyMetrics } from '../../ts/node/policy/policy-metrics.ts';
import { PolicyProgrammer } from '../../ts/node/policy/program-policy.ts';
import { StatusFiles } from '../../ts/node/policy/write-status-files.ts';
import { PolicyEngine } from '../../ts/policy/engine.ts';
import type { EndpointInput } from '../../ts/policy/endpoints.ts';
import { convertKubernetesPolicy } from '../../ts/policy/kubernetes.ts';
import { tempDir } from '../helpers/cni.ts';

const NODE = 'n1';
const log = new Logger('test', () => undefined, process.pid);

class Writer {
  whole: Table[] = [];
  elements: ElementChanges[] = [];
  async apply(table: Table): Promise<void> {
    this.whole.push(structuredClone(table));
  }
  async updateElements(changes: ElementChanges): Promise<void> {
    this.elements.push(changes);
  }
}

const endpoint = (name: string, labels: Record<string, string>, address: string, local: boolean): EndpointInput => ({
  key: `shop/${name}`,
  namespace: 'shop',
  name,
  labels,
  addresses: [address],
  node: local ? NODE : 'n2',
  ...(local ? { interfaceName: `cali${name.padEnd(11, '0')}` } : {}),
});

function setUp() {
  const engine = new PolicyEngine({ nodeName: NODE, families: [4] });
  // Only what a pass reads of the feed: the engine itself is given the inputs below.
  const feed = {
    engine,
    pass: () => 0,
    localPods: () => new Map<string, LocalPod>(),
    resourceIssues: () => new Map(),
  } as unknown as EngineFeed;
  const writer = new Writer();
  // The coalescing wait is an hour: a pass that waited it out would outlast the test's timeout.
  const composer = new NftComposer({ family: 'inet', name: 'netplug', contributors: ['policy'], writer, coalesceMs: 3_600_000 });
  const metrics = new PolicyMetrics(new Registry());
  const programmer = new PolicyProgrammer({ feed, table: composer, files: undefined, metrics, log, repairMs: 3_600_000 });
  const pass = () => programmer.exclusive(() => programmer.pass());
  return { engine, writer, composer, pass };
}

test('a pod elsewhere joining a shared set is an element batch; a local pod a whole write; the composer keeps the part', async (t) => {
  const { engine, writer, composer, pass } = setUp();
  engine.upsertEndpoint(endpoint('web', { app: 'web' }, '10.0.0.1', true));
  engine.upsertPolicy(
    convertKubernetesPolicy({
      metadata: { name: 'from-db', namespace: 'shop' },
      spec: { podSelector: { matchLabels: { app: 'web' } }, ingress: [{ from: [{ podSelector: { matchLabels: { role: 'db' } } }] }] },
    }).policy,
  );
  t.is(await pass(), 'written', 'without waiting out the composer’s coalescing');
  t.is(writer.whole.length, 1);

  engine.upsertEndpoint(endpoint('db1', { role: 'db' }, '10.0.9.1', false));
  t.is(await pass(), 'written');
  t.is(writer.whole.length, 1, 'no whole write for a set member');
  t.is(writer.elements.length, 1);
  t.deepEqual(writer.elements[0]?.sets?.[0]?.add, ['10.0.9.1']);
  const setName = writer.elements[0]?.sets?.[0]?.name;
  t.deepEqual(composer.table()?.sets?.find((s) => s.name === setName)?.elements, ['10.0.9.1']);

  // A local pod: chains, so a whole write, which holds the member the element batch added.
  engine.upsertEndpoint(endpoint('web2', { app: 'web' }, '10.0.0.2', true));
  t.is(await pass(), 'written');
  t.is(writer.whole.length, 2);
  t.deepEqual(writer.whole[1]?.sets?.find((s) => s.name === setName)?.elements, ['10.0.9.1']);
  t.deepEqual(composer.table(), { family: 'inet', name: 'netplug', chains: [], sets: [], maps: [], counters: [], ...engine.part() });
  t.is(await pass(), 'unchanged');
});

test('status files: written once, not read again between directory reads; one removed by hand comes back at the next read', (t) => {
  const prefix = tempDir(t, 'status');
  let now = 0;
  const files = new StatusFiles(prefix, () => now);
  const dir = join(prefix, 'endpoint-status');
  const a = { name: 'k8s shop%2Fa eth0', content: '{"ifaceName":"calia"}' };
  const b = { name: 'k8s shop%2Fb eth0', content: '{"ifaceName":"calib"}' };
  t.deepEqual(files.sync([a]), { written: [a.name], removed: [] });
  now += 100;
  t.deepEqual(files.sync([a, b]), { written: [b.name], removed: [] });
  rmSync(join(dir, a.name));
  now += 100;
  t.deepEqual(files.sync([a, b]), { written: [], removed: [] }, 'between reads it goes by what it wrote');
  now += 10_000;
  t.deepEqual(files.sync([a, b]), { written: [a.name], removed: [] }, 'the directory read again');
  t.deepEqual(readdirSync(dir).sort(), [a.name, b.name]);
  t.deepEqual(files.sync([b]), { written: [], removed: [a.name] });
  t.false(existsSync(join(dir, a.name)));
  // The directory removed by hand: the write fails, so the sync reads it again and makes it.
  rmSync(dir, { recursive: true });
  now += 100;
  t.deepEqual(files.sync([a, b]).written.sort(), [a.name, b.name]);
});
