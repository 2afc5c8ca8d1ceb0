// npm run bench:startup: what a pod pays for a plugin process, measured in one run.
//   start-up: `netplug` VERSION (the single executable) against bare `node -e 0` (Node 24) and
//             Debian's ptp VERSION (a Go plugin);
//   ADD+DEL:  a pod wired and unwired by netplug (host-local IPAM) against Debian's ptp with the
//             same host-local, each command a fresh process with the CNI environment, as a
//             runtime runs them.
// Variants are interleaved sample by sample so that drift on a noisy machine hits all alike.
// Writes bench/results/startup.{md,json,svg}.
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { medianOf, writeReport, type Series } from './lib/report.ts';
import { runChecked, stopNativeRuns } from './lib/run-plugin.ts';

const ROOT = new URL('../', import.meta.url).pathname;
const NETPLUG = join(ROOT, 'dist/cni/netplug');
const NODE = process.execPath;
const CNI_PATH = `${join(ROOT, 'dist/cni')}:/usr/lib/cni`;
const STARTUP_SAMPLES = 100;
const CYCLES = 60;
const WARMUP = 5;

/** A fresh process to its exit, spawned as a runtime spawns it; its milliseconds from spawn to exit. */
const timed = async (file: string, args: string[], env: Record<string, string>, input = ''): Promise<number> =>
  (await runChecked(file, file, env, input, args)).ms;

const version = (plugin: string) => () => timed(plugin, [], { CNI_COMMAND: 'VERSION', PATH: '/usr/bin:/bin' }, '{"cniVersion":"1.0.0"}');

async function main(): Promise<void> {
  if (process.getuid?.() !== 0) throw new Error('run as root: ADD creates interfaces in a namespace');
  const scratch = mkdtempSync(join(tmpdir(), 'netplug-bench-'));
  const netns = `npbench-startup-${process.pid}`;
  execFileSync('ip', ['netns', 'add', netns]);
  try {
    const startup = {
      'node -e 0 (Node 24)': () => timed(NODE, ['-e', '0'], {}),
      'netplug VERSION': version(NETPLUG),
      'ptp VERSION (Go)': version('/usr/lib/cni/ptp'),
    };
    const cycleConf = (type: 'netplug' | 'ptp', octet: number) =>
      JSON.stringify({
        cniVersion: '1.0.0',
        name: `bench-${type}`,
        type,
        ipam: { type: 'host-local', dataDir: join(scratch, type), ranges: [[{ subnet: `10.${octet}.0.0/16` }]] },
      });
    let cycle = 0;
    const addDel = (type: 'netplug' | 'ptp', octet: number) => {
      const conf = cycleConf(type, octet);
      return async (): Promise<[number, number]> => {
        const env = {
          CNI_CONTAINERID: `bench${type}${cycle++}`,
          CNI_NETNS: `/run/netns/${netns}`,
          CNI_IFNAME: 'eth0',
          CNI_PATH,
          PATH: '/usr/sbin:/usr/bin:/sbin:/bin',
        };
        const file = type === 'netplug' ? NETPLUG : '/usr/lib/cni/ptp';
        const add = await timed(file, [], { ...env, CNI_COMMAND: 'ADD' }, conf);
        return [add, await timed(file, [], { ...env, CNI_COMMAND: 'DEL' }, conf)];
      };
    };
    const cycles = { netplug: addDel('netplug', 241), 'ptp + host-local': addDel('ptp', 242) };

    for (let i = 0; i < WARMUP; i++) {
      for (const run of Object.values(startup)) await run();
      for (const run of Object.values(cycles)) await run();
    }
    const startupSamples = Object.fromEntries(Object.keys(startup).map((k) => [k, [] as number[]]));
    for (let i = 0; i < STARTUP_SAMPLES; i++) {
      for (const [label, run] of Object.entries(startup)) startupSamples[label]?.push(await run());
    }
    const cycleSamples = Object.fromEntries(Object.keys(cycles).map((k) => [k, { add: [] as number[], del: [] as number[] }]));
    for (let i = 0; i < CYCLES; i++) {
      for (const [label, run] of Object.entries(cycles)) {
        const [add, del] = await run();
        cycleSamples[label]?.add.push(add);
        cycleSamples[label]?.del.push(del);
      }
    }

    const series: Series[] = [
      ...Object.entries(startupSamples).map(([label, samplesMs]) => ({ group: 'start-up (process to exit)', label, samplesMs })),
      ...Object.entries(cycleSamples).map(([label, s]) => ({
        group: 'ADD + DEL of one pod',
        label,
        samplesMs: s.add.map((ms, i) => ms + (s.del[i] ?? 0)),
      })),
      ...Object.entries(cycleSamples).map(([label, s]) => ({ group: 'ADD', label, samplesMs: s.add })),
      ...Object.entries(cycleSamples).map(([label, s]) => ({ group: 'DEL', label, samplesMs: s.del })),
    ];
    const median = (group: string, label: string) => medianOf(series, group, label);
    const versionRatio =
      median('start-up (process to exit)', 'netplug VERSION') / median('start-up (process to exit)', 'node -e 0 (Node 24)');
    const table = writeReport({
      name: 'startup',
      title: 'Plugin processes: start-up and a pod ADD + DEL',
      series,
      ratios: [
        { label: 'netplug VERSION / node -e 0, median', value: versionRatio },
        {
          label: 'netplug VERSION / ptp VERSION, median',
          value: median('start-up (process to exit)', 'netplug VERSION') / median('start-up (process to exit)', 'ptp VERSION (Go)'),
        },
        {
          label: 'netplug / ptp + host-local, ADD + DEL median',
          value: median('ADD + DEL of one pod', 'netplug') / median('ADD + DEL of one pod', 'ptp + host-local'),
        },
        { label: 'netplug / ptp + host-local, ADD median', value: median('ADD', 'netplug') / median('ADD', 'ptp + host-local') },
      ],
      notes: [
        "Every sample is a fresh process spawned as a container runtime spawns it (Go's os/exec in containerd; here Rust's posix_spawn, crates/netplug-shim/examples/exec-server.rs) and timed natively from spawn to exit, stdin included. Not by Node's spawnSync, ~3 ms dearer per process on this VM, which every variant would carry.",
        `Start-up: ${STARTUP_SAMPLES} samples per variant, interleaved. ADD + DEL: ${CYCLES} pods per variant, interleaved, into one namespace, IPv4, host-local IPAM for both.`,
        'netplug is a Node 24 single executable with V8 code cache; ADD and DEL also run the host-local IPAM plugin as a second process, as ptp does.',
        'DEL time is mostly the kernel deleting the veth (RCU grace periods in 4 ms ticks, see dataplane.md).',
      ],
    });
    console.log(table);
    console.log('\nwrote bench/results/startup.{md,json,svg}');
    console.log(`netplug VERSION / node -e 0 median ratio: ${versionRatio.toFixed(2)}`);
  } finally {
    await stopNativeRuns();
    spawnSync('ip', ['netns', 'del', netns]);
    rmSync(scratch, { recursive: true, force: true });
  }
}

main().catch((err: unknown) => {
  console.error(err instanceof Error ? err.message : err);
  process.exitCode = 1;
});
