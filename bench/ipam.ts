// npm run bench:ipam: netplug with netplug-ipam on a real etcd, measured in one run against peers.
//   sequential: a pod's ADD + DEL by the built netplug (netplug-ipam on etcd) against Debian's
//               ptp with host-local, each command a fresh process with the CNI environment, the
//               variants interleaved pod by pod;
//   burst:      100 ADDs started at once on one node, timed until every pod is networked, against
//               the same burst of ptp + host-local;
//   round trips: etcd requests per ADD and per DEL, read from etcd's own request counters;
//   simulated nodes: allocations per second by 100 nodes against one etcd through the address
//               manager's code, against the floor of one bare etcd transaction per allocation.
// Writes bench/results/ipam.{md,json,svg}.
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { allocate } from '../ts/ipam/allocator.ts';
import { releaseHandle } from '../ts/ipam/release.ts';
import { listPools } from '../ts/ipam/pools.ts';
import { EtcdClient } from '../ts/store/etcd/client.ts';
import { GatewayConnection } from '../ts/store/etcd/http.ts';
import { EtcdStore } from '../ts/store/etcd/store.ts';
import { launchEtcd, type EtcdServer } from '../scripts/lib/etcd-server.ts';
import { medianOf, writeReport, type Series } from './lib/report.ts';
import { runChecked, runtimeEnv, runToExit, stopNativeRuns, type Run } from './lib/run-plugin.ts';
import { elapsedMs } from './lib/stats.ts';

const ROOT = new URL('../', import.meta.url).pathname;
const NETPLUG = join(ROOT, 'dist/cni/netplug');
const NETPLUGCTL = join(ROOT, 'dist/bin/netplugctl');
const PTP = '/usr/lib/cni/ptp';
const CNI_PATH = `${join(ROOT, 'dist/cni')}:/usr/lib/cni`;
const CYCLES = 60;
const WARMUP = 5;
const BURST = 100;
const BURST_ROUNDS = 3;
const NODES = 100;
const PER_NODE = 10;
const NODE_NAME = 'bench-node';

type Plugin = 'netplug' | 'ptp';

const scratch = mkdtempSync(join(tmpdir(), 'netplug-bench-ipam-'));
const namespaces: string[] = [];
let etcd: EtcdServer | undefined;

function netconf(plugin: Plugin, endpoints: string): string {
  return JSON.stringify(
    plugin === 'netplug'
      ? {
          cniVersion: '1.0.0',
          name: 'bench-netplug',
          type: 'netplug',
          etcd_endpoints: endpoints,
          nodename: NODE_NAME,
          ipam: { type: 'netplug-ipam' },
        }
      : {
          cniVersion: '1.0.0',
          name: 'bench-ptp',
          type: 'ptp',
          ipam: { type: 'host-local', dataDir: join(scratch, 'host-local'), ranges: [[{ subnet: '10.243.0.0/16' }]] },
        },
  );
}

const cniEnv = (command: string, container: string, netns: string) => runtimeEnv(command, container, netns, CNI_PATH);

const runOk = (plugin: Plugin, command: string, container: string, netns: string, conf: string): Promise<Run> =>
  runChecked(plugin, plugin === 'netplug' ? NETPLUG : PTP, cniEnv(command, container, netns), conf);

const runAsync = (plugin: Plugin, command: string, container: string, netns: string, conf: string): Promise<Run> =>
  runToExit(plugin === 'netplug' ? NETPLUG : PTP, cniEnv(command, container, netns), conf);

function addNamespace(name: string): string {
  execFileSync('ip', ['netns', 'add', name]);
  namespaces.push(name);
  return name;
}

/** etcd's count of Range and Txn requests handled (every datastore round trip is one). */
function etcdRequests(port: number): Promise<number> {
  return new Promise((resolve, reject) => {
    request({ host: '127.0.0.1', port, path: '/metrics' }, (response) => {
      let text = '';
      response.on('data', (chunk: Buffer) => (text += chunk));
      response.on('end', () => {
        const lines = text.split('\n').filter((l) => l.startsWith('grpc_server_handled_total') && /grpc_method="(Range|Txn)"/.test(l));
        resolve(lines.reduce((sum, line) => sum + Number(line.split(' ').at(-1)), 0));
      });
    })
      .on('error', reject)
      .end();
  });
}

async function sequential(endpoints: string, port: number) {
  const netns = addNamespace(`npbench-ipam-${process.pid}`);
  const confs = { netplug: netconf('netplug', endpoints), ptp: netconf('ptp', endpoints) };
  const samples = { netplug: { add: [] as number[], del: [] as number[] }, ptp: { add: [] as number[], del: [] as number[] } };
  let pod = 0;
  const cycle = async (plugin: Plugin): Promise<[number, number]> => {
    const container = `bench-${plugin}-${pod++}`;
    const add = await runOk(plugin, 'ADD', container, netns, confs[plugin]);
    return [add.ms, (await runOk(plugin, 'DEL', container, netns, confs[plugin])).ms];
  };
  for (let i = 0; i < WARMUP; i++) for (const plugin of ['netplug', 'ptp'] as const) await cycle(plugin);
  // Round trips: etcd's counters around ADDs and DELs of netplug alone.
  const before = await etcdRequests(port);
  const container = 'bench-round-trips';
  await runOk('netplug', 'ADD', container, netns, confs.netplug);
  const afterAdd = await etcdRequests(port);
  await runOk('netplug', 'DEL', container, netns, confs.netplug);
  const afterDel = await etcdRequests(port);
  for (let i = 0; i < CYCLES; i++) {
    // Alternate which goes first, so that neither always follows the other's veth deletion.
    for (const plugin of i % 2 === 0 ? (['netplug', 'ptp'] as const) : (['ptp', 'netplug'] as const)) {
      const [add, del] = await cycle(plugin);
      samples[plugin].add.push(add);
      samples[plugin].del.push(del);
    }
  }
  return { samples, roundTrips: { add: afterAdd - before, del: afterDel - afterAdd } };
}

async function burst(endpoints: string) {
  const pods = Array.from({ length: BURST }, (_, i) => addNamespace(`npbench-burst-${process.pid}-${i}`));
  const confs = { netplug: netconf('netplug', endpoints), ptp: netconf('ptp', endpoints) };
  const samples: Record<Plugin, number[]> = { netplug: [], ptp: [] };
  for (let round = 0; round < BURST_ROUNDS; round++) {
    for (const plugin of ['netplug', 'ptp'] as const) {
      const start = process.hrtime.bigint();
      const adds = await Promise.all(
        pods.map((netns, i) => runAsync(plugin, 'ADD', `burst-${plugin}-${round}-${i}`, netns, confs[plugin])),
      );
      samples[plugin].push(elapsedMs(start));
      const failed = adds.filter((a) => a.status !== 0);
      if (failed.length > 0) throw new Error(`${failed.length} of ${BURST} ${plugin} ADDs failed: ${failed[0]?.stdout}`);
      const addresses = new Set(adds.map((a) => JSON.parse(a.stdout).ips[0].address));
      if (addresses.size !== BURST) throw new Error(`${plugin}: ${BURST} ADDs got only ${addresses.size} distinct addresses`);
      const dels = await Promise.all(
        pods.map((netns, i) => runAsync(plugin, 'DEL', `burst-${plugin}-${round}-${i}`, netns, confs[plugin])),
      );
      if (dels.some((d) => d.status !== 0)) throw new Error(`${plugin}: a DEL after the burst failed`);
    }
  }
  return samples;
}

/** 100 nodes, each allocating PER_NODE addresses one after another, all nodes at once. */
async function simulatedNodes(endpoints: string) {
  const open = () => new EtcdStore(new EtcdClient(new GatewayConnection({ endpoints: [new URL(endpoints)] })));
  const stores = Array.from({ length: NODES }, open);
  const pools = await listPools(stores[0] as EtcdStore);
  const allocateAll = async () => {
    const start = process.hrtime.bigint();
    await Promise.all(
      stores.map(async (store, n) => {
        for (let i = 0; i < PER_NODE; i++) {
          const attributes = { node: `sim-${n}`, ifname: 'eth0', timestamp: new Date().toISOString() };
          await allocate({ store, handle: `sim.node${n}-pod${i}`, node: `sim-${n}`, attributes }, [{ family: 4, pools }]);
        }
      }),
    );
    return elapsedMs(start);
  };
  const release = () =>
    Promise.all(
      stores.map((store, n) => Promise.all(Array.from({ length: PER_NODE }, (_, i) => releaseHandle(store, `sim.node${n}-pod${i}`)))),
    );
  // The floor: one bare transaction (create a key) per allocation, same concurrency.
  const floor = async (round: number) => {
    const start = process.hrtime.bigint();
    await Promise.all(
      stores.map(async (store, n) => {
        for (let i = 0; i < PER_NODE; i++) await store.commit([{ key: `/netplug-bench/floor/${round}/${n}/${i}`, create: { n, i } }]);
      }),
    );
    return elapsedMs(start);
  };
  const samples = { allocator: [] as number[], floor: [] as number[] };
  const requestsBefore = stores.reduce((sum, s) => sum + s.client.requests, 0);
  samples.allocator.push(await allocateAll());
  const requestsPerAllocation = (stores.reduce((sum, s) => sum + s.client.requests, 0) - requestsBefore) / (NODES * PER_NODE);
  await release();
  for (let round = 0; round < 4; round++) {
    samples.floor.push(await floor(round));
    samples.allocator.push(await allocateAll());
    await release();
  }
  for (const store of stores) store.close();
  return { samples, requestsPerAllocation };
}

async function cleanup(): Promise<void> {
  await stopNativeRuns();
  for (const name of namespaces.splice(0)) spawnSync('ip', ['netns', 'del', name]);
  await etcd?.stop();
  rmSync(scratch, { recursive: true, force: true });
}

async function main(): Promise<void> {
  if (process.getuid?.() !== 0) throw new Error('run as root: ADD creates interfaces in namespaces');
  process.once('SIGINT', () => void cleanup().finally(() => process.exit(130)));
  etcd = await launchEtcd(join(scratch, 'etcd'));
  const ctl = (...args: string[]) => execFileSync(NETPLUGCTL, args, { env: { ETCD_ENDPOINTS: etcd?.endpoints ?? '' }, encoding: 'utf8' });
  ctl('pool', 'create', 'bench', '--cidr', '10.242.0.0/16');
  ctl('pool', 'create', 'sim', '--cidr', '10.128.0.0/12', '--node-selector', 'simulated == "true"');

  const seq = await sequential(etcd.endpoints, etcd.port);
  const bursts = await burst(etcd.endpoints);
  // The simulated nodes allocate from their own pool: label-free nodes would take "bench".
  for (let n = 0; n < NODES; n++) ctl('node', 'create', `sim-${n}`, '--label', 'simulated=true');
  const sim = await simulatedNodes(etcd.endpoints);
  const leftover = JSON.parse(ctl('ipam', 'show', '-o', 'json')).pools.reduce(
    (sum: number, p: { allocated: number }) => sum + p.allocated,
    0,
  );
  if (leftover !== 0) throw new Error(`${leftover} addresses still allocated after the benchmark`);

  const perSecond = (ms: number[]) =>
    `${Math.round((NODES * PER_NODE) / (([...ms].sort((a, b) => a - b)[Math.floor(ms.length / 2)] ?? 1) / 1000))}`;
  const series: Series[] = [
    ...(['netplug', 'ptp'] as const).map((p) => ({
      group: 'ADD + DEL of one pod',
      label: p === 'netplug' ? 'netplug + netplug-ipam (etcd)' : 'ptp + host-local',
      samplesMs: seq.samples[p].add.map((ms, i) => ms + (seq.samples[p].del[i] ?? 0)),
    })),
    ...(['netplug', 'ptp'] as const).map((p) => ({
      group: 'ADD',
      label: p === 'netplug' ? 'netplug + netplug-ipam (etcd)' : 'ptp + host-local',
      samplesMs: seq.samples[p].add,
    })),
    ...(['netplug', 'ptp'] as const).map((p) => ({
      group: 'DEL',
      label: p === 'netplug' ? 'netplug + netplug-ipam (etcd)' : 'ptp + host-local',
      samplesMs: seq.samples[p].del,
    })),
    ...(['netplug', 'ptp'] as const).map((p) => ({
      group: `burst of ${BURST} ADDs on one node, until all networked`,
      label: p === 'netplug' ? 'netplug + netplug-ipam (etcd)' : 'ptp + host-local',
      samplesMs: bursts[p],
    })),
    {
      group: `${NODES} nodes × ${PER_NODE} allocations`,
      label: 'netplug-ipam allocator',
      samplesMs: sim.samples.allocator,
      extra: { 'allocations/s': perSecond(sim.samples.allocator) },
    },
    {
      group: `${NODES} nodes × ${PER_NODE} allocations`,
      label: 'floor: one bare etcd txn each',
      samplesMs: sim.samples.floor,
      extra: { 'allocations/s': perSecond(sim.samples.floor) },
    },
  ];
  const median = (group: string, label: string) => medianOf(series, group, label);
  const np = 'netplug + netplug-ipam (etcd)';
  const ratio = median('ADD + DEL of one pod', np) / median('ADD + DEL of one pod', 'ptp + host-local');
  const table = writeReport({
    name: 'ipam',
    title: 'netplug-ipam on etcd: per-pod latency, bursts, round trips, allocation rate',
    series,
    ratios: [
      { label: 'netplug / ptp + host-local, ADD + DEL median', value: ratio },
      { label: 'netplug / ptp + host-local, ADD median', value: median('ADD', np) / median('ADD', 'ptp + host-local') },
      { label: 'netplug / ptp + host-local, DEL median', value: median('DEL', np) / median('DEL', 'ptp + host-local') },
      {
        label: `netplug / ptp + host-local, burst of ${BURST} median`,
        value:
          median(`burst of ${BURST} ADDs on one node, until all networked`, np) /
          median(`burst of ${BURST} ADDs on one node, until all networked`, 'ptp + host-local'),
      },
      {
        label: 'allocator / floor, 100 nodes median',
        value:
          median(`${NODES} nodes × ${PER_NODE} allocations`, 'netplug-ipam allocator') /
          median(`${NODES} nodes × ${PER_NODE} allocations`, 'floor: one bare etcd txn each'),
      },
      { label: 'etcd round trips per ADD', value: seq.roundTrips.add },
      { label: 'etcd round trips per DEL', value: seq.roundTrips.del },
      { label: 'etcd requests per allocation, 100 simulated nodes (first round, blocks being claimed)', value: sim.requestsPerAllocation },
    ],
    notes: [
      "Each ADD and DEL is a fresh process with the CNI environment a runtime gives, spawned as a container runtime spawns it (Go's os/exec in containerd; here Rust's posix_spawn, crates/netplug-shim/examples/exec-server.rs) and timed natively from spawn to exit, stdin included. Not by Node's spawn, which costs ~3 ms more per process on this VM and would add that to both variants.",
      `Sequential: ${CYCLES} pods per variant into one namespace, IPv4, interleaved pod by pod (which goes first alternates). ptp runs host-local as a second process for ADD and DEL; netplug runs netplug-ipam in-process against etcd (Debian's etcd-server on loopback, one member).`,
      'netplug writes a workload endpoint per pod besides the allocation; ptp does no datastore work at all.',
      `Burst: ${BURST} namespaces; ${BURST} ADD processes spawned at once, timed until the last exits; ${BURST_ROUNDS} rounds per variant; every address checked distinct; the pods are deleted between rounds (not timed).`,
      "Round trips: the growth of etcd's own grpc_server_handled_total for Range and Txn across one ADD and one DEL.",
      `Simulated nodes: ${NODES} connections to etcd from one process, each a node allocating ${PER_NODE} addresses in turn, all nodes concurrently, through the allocator (blocks claimed with affinity, compare-and-swap); released between rounds. The first round also claims the blocks.`,
      'DEL time is mostly the kernel deleting the veth (RCU grace periods, see dataplane.md); netplug overlaps its datastore work with it.',
    ],
  });
  console.log(table);
  console.log('\nwrote bench/results/ipam.{md,json,svg}');
  console.log(`netplug / ptp + host-local ADD + DEL median ratio: ${ratio.toFixed(2)}`);
}

main()
  .catch((err: unknown) => {
    console.error(err instanceof Error ? err.message : err);
    process.exitCode = 1;
  })
  .finally(cleanup);
