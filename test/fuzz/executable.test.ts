// Fuzzing through the built executable, run as a runtime runs it (environment + stdin, 2 at a
// time, 30 s per run, in a pids cgroup of its own), on a real etcd and real namespaces: 500 runs
// in `npm test` (NETPLUG_FUZZ_SCALE grows them). Each run exits 0 or prints one CNI error object
// with an expected code; never a stack trace, a signal, a hang or megabytes on stderr. Every ADD is
// followed by its DEL, and nothing is left: no link in the pod's namespace or on the host, no
// address in the datastore.
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';

import test, { type ExecutionContext } from 'ava';
import { Etcd3 } from 'etcd3';

import { CNI_PATH, requireBuilt, tempDir } from '../helpers/cni.ts';
import { startEtcd, type EtcdServer } from '../helpers/etcd.ts';
import { ctl, ctlOk, ipamNetconf, totalAllocated } from '../helpers/ipam.ts';
import { requireRoot, uniqueSubnet4 } from '../helpers/kernel.ts';
import { addNetns, attachmentCase, derivedHostName, hostLinkExists, leftovers, inTurnFor } from './lib/attachment.ts';
import { judgeRun, limiter, runBounded } from './lib/exec.ts';
import { mutatedArgs } from './lib/generators.ts';
import { Findings, formatReport, shorten } from './lib/harness.ts';
import { damageBytes, mapFields, mutateValue, serialize } from './lib/mutate.ts';
import { FUZZ_SEED, replay, Rng } from './lib/prng.ts';
import { block, COMMAND_WORDS, handle, NETCONF_FIELDS, NODE, POOL, AFFINITY } from './lib/seeds.ts';
import { EDGE_STRINGS, hostileString, RawJson } from './lib/values.ts';

const SCALE = Number(process.env['NETPLUG_FUZZ_SCALE'] ?? 1);
const scaled = (n: number) => Math.max(1, Math.round(n * SCALE));
const COUNTS = { environment: scaled(150), netconf: scaled(200), cniArgs: scaled(75), documents: scaled(75) };

/** Two plugin runs at a time across the whole file. */
const slot = limiter(2);

test.before(() => {
  requireRoot();
  requireBuilt();
});

/** The environment a runtime gives, and a unique container ID per case (no two cases share state). */
function runtimeEnv(target: string, index: number, netns: string): Record<string, string> {
  return {
    PATH: '/usr/sbin:/usr/bin:/sbin:/bin',
    CNI_CONTAINERID: `fuzz${process.pid}${target}${index}`,
    CNI_NETNS: netns,
    CNI_IFNAME: 'eth0',
    CNI_PATH,
  };
}

/**
 * What an environment can carry (a runtime could send nothing else): no NUL (execve ends strings
 * there), at most 128 KiB per variable (the kernel's MAX_ARG_STRLEN; 100,000 bytes here).
 */
function envSafe(text: string): string {
  let out = text.replaceAll('\0', '');
  while (Buffer.byteLength(out) > 100_000) out = out.slice(0, Math.floor(out.length * 0.9));
  return out;
}

interface Setup {
  etcd: EtcdServer;
  network: string;
  node: string;
  dir: string;
}

async function setup(t: ExecutionContext, network: string): Promise<Setup> {
  t.timeout(10 * 60_000);
  const etcd = await startEtcd(t);
  ctlOk(t, etcd, 'pool', 'create', 'fuzz', '--cidr', uniqueSubnet4());
  return { etcd, network, node: 'fuzz-node', dir: tempDir(t, 'fuzz') };
}

/** Runs `count` cases at the file's concurrency, gathering findings by cause. */
async function runCases(
  t: ExecutionContext,
  target: string,
  count: number,
  one: (rng: Rng, index: number) => Promise<{ problems: string[]; input: string }>,
): Promise<Findings> {
  const findings = new Findings();
  await Promise.all(
    Array.from({ length: count }, (_, index) =>
      slot(async () => {
        const { problems, input } = await one(Rng.forCase(target, index), index);
        for (const problem of problems) findings.add(problem, replay(target, index), input);
      }),
    ),
  );
  t.log(
    `${target}: ${count} runs of the executable (plus their DELs), ${findings.list().length} distinct findings (NETPLUG_FUZZ_SEED=${FUZZ_SEED})`,
  );
  return findings;
}

function verdict(t: ExecutionContext, target: string, count: number, findings: Findings): void {
  const report = { target, cases: count, findings: findings.list() };
  t.deepEqual(
    report.findings.map((f) => f.cause),
    [],
    formatReport(report),
  );
}

/** Nothing allocated and nothing inconsistent in the datastore after every case was DELed. */
function datastoreClean(t: ExecutionContext, etcd: EtcdServer): void {
  t.is(totalAllocated(t, etcd), 0, 'no address left allocated');
  const check = ctl(etcd, 'ipam', 'check', '--grace-period', '0');
  t.is(check.status, 0, `ipam check: ${check.stdout}${check.stderr}`);
}

/** One attachment case: namespace, ADD, DEL, leftovers, namespace gone. */
async function attachment(
  env: Record<string, string>,
  input: Buffer,
  addCodes: readonly number[],
  options: { mustFail?: boolean; delCodes?: readonly number[]; cwd?: string } = {},
): Promise<string[]> {
  const { problems } = await attachmentCase(env, input, addCodes, options);
  return problems;
}

test(`executable/environment: ${COUNTS.environment} runs with mutated CNI environments exit 0 or with error 3, 4, 7 or 8, and leave nothing`, async (t) => {
  const { etcd, network, node, dir } = await setup(t, 'fuzzenv');
  const netconf = Buffer.from(JSON.stringify(ipamNetconf(etcd, { name: network, node })));
  const findings = await runCases(t, 'executable/environment', COUNTS.environment, async (rng, index) => {
    const netns = addNetns();
    try {
      const env = runtimeEnv('e', index, netns.path);
      const changed: string[] = [];
      // ADD needs each of these: one dropped (and not set again by a later round) must fail with 4.
      const missing = new Set<string>();
      for (let round = 1 + rng.int(2); round > 0; round--) {
        const name = rng.pick(['CNI_CONTAINERID', 'CNI_NETNS', 'CNI_IFNAME', 'CNI_PATH', 'CNI_ARGS', 'FELIX_INTERFACEPREFIX', 'drop']);
        if (name === 'drop') {
          const dropped = rng.pick(['CNI_CONTAINERID', 'CNI_IFNAME', 'CNI_PATH', 'CNI_NETNS']);
          delete env[dropped];
          changed.push(`-${dropped}`);
          missing.add(dropped);
          continue;
        }
        let value = envSafe(hostileString(rng, env[name] ?? ''));
        // Long prefixes are a known finding of their own (known-findings.test.ts); short hostile
        // ones keep concurrent cases from sharing a host interface.
        if (name === 'FELIX_INTERFACEPREFIX') value = value.slice(0, 4);
        // Valid IDs stay unique: two cases never own one attachment.
        if (name === 'CNI_CONTAINERID' && /^[a-zA-Z0-9][a-zA-Z0-9_.-]*$/.test(value)) value += `-${process.pid}-${index}`;
        // Never another process's namespace (the host's least of all).
        // nor another case's (a mutated path could name a live namespace of this run).
        if (name === 'CNI_NETNS' && (value.startsWith('/proc') || (value.includes('/netns/') && value !== netns.path)))
          value = '/nonexistent';
        if (value === '' && name !== 'CNI_ARGS' && name !== 'FELIX_INTERFACEPREFIX') missing.add(name);
        else missing.delete(name);
        env[name] = value;
        changed.push(`${name}=${shorten(value, 80)}`);
      }
      const input = `${changed.join(' ')}`;
      const mustFail = missing.size > 0;
      if (rng.chance(0.2)) {
        // Commands other than ADD/DEL, or none the plugin knows.
        const command = envSafe(rng.chance(0.7) ? rng.pick(COMMAND_WORDS) : hostileString(rng, 'ADD'));
        const run = await runBounded({ ...env, CNI_COMMAND: command }, netconf, { cwd: dir });
        const codes = ['VERSION', ''].includes(command)
          ? []
          : ['CHECK', 'GC', 'STATUS', 'ADD', 'DEL'].includes(command)
            ? [3, 4, 7, 8]
            : [4];
        const problem = judgeRun(run, codes, { mustFail: !['VERSION', '', 'CHECK', 'GC', 'STATUS', 'ADD', 'DEL'].includes(command) });
        // An ADD run this way is undone as the attachment cases are.
        if (command === 'ADD') await runBounded({ ...env, CNI_COMMAND: 'DEL' }, netconf, { cwd: dir });
        return {
          problems: problem ? [`CNI_COMMAND ${JSON.stringify(command.slice(0, 20))}: ${problem}`] : [],
          input: `CNI_COMMAND=${shorten(command, 40)} ${input}`,
        };
      }
      const hostName = derivedHostName(env);
      return await inTurnFor(hostName, async () => {
        const hostBefore = hostName !== undefined && hostLinkExists(hostName);
        const problems = await attachment(env, netconf, mustFail ? [4] : [3, 4, 7, 8], { mustFail, cwd: dir });
        problems.push(...leftovers(netns, hostName, hostBefore));
        return { problems, input };
      });
    } finally {
      netns.remove();
    }
  });
  datastoreClean(t, etcd);
  verdict(t, 'executable/environment', COUNTS.environment, findings);
});

/**
 * A mutated netconf made safe to run as root on a shared machine, wherever a field sits (nested,
 * or one copy of a repeated key): files only under `dir`, no readiness gate or API server URL to
 * wait on, no endpoint but loopback ones, and the plugin runs in `dir` (relative paths land
 * there). A self-delegating IPAM type, should mutation make one, is contained by the run's cgroup.
 */
function sandboxed(conf: unknown, dir: string, etcd: EtcdServer, rng: Rng): unknown {
  const inDir = (sub: string, value: unknown) =>
    typeof value === 'string' ? join(dir, sub, value.replaceAll('..', '__').replaceAll('\0', '%00')) : value;
  const endpoints = [
    etcd.endpoints,
    '',
    ',,,',
    `${etcd.endpoints},,`,
    'http://127.0.0.1:1',
    'notaurl',
    'https://[::1',
    ` ${etcd.endpoints}`,
  ];
  const mapped = mapFields(conf, (key, value) => {
    switch (key) {
      case 'log_file_path':
        return inDir('log', value);
      case 'endpoint_status_dir':
        return inDir('status', value);
      case 'dataDir':
        return inDir('host-local', value);
      case 'readiness_gates':
      case 'k8s_api_root':
      case 'etcd_discovery_srv':
        return JSON.stringify(value)?.includes('://') || typeof value === 'string' ? 17 : value;
      case 'etcd_endpoints':
        return typeof value === 'string' ? rng.pick(endpoints) : value;
      case 'etcd_authority':
        return typeof value === 'string' ? rng.pick(endpoints).replace(/^https?:\/\//, '') : value;
      case 'policy_setup_timeout_seconds':
        return typeof value === 'number' && value > 5 ? 5 : value;
      default:
        return value;
    }
  });
  // A mutation that drops host-local's dataDir would send its state to the machine's
  // /var/lib/cni/networks: it gets one in `dir` instead.
  const ipam = (mapped as { ipam?: Record<string, unknown> } | null)?.ipam;
  if (ipam && typeof ipam === 'object' && !Array.isArray(ipam) && ipam['type'] === 'host-local' && typeof ipam['dataDir'] !== 'string')
    ipam['dataDir'] = join(dir, 'host-local', 'default');
  return mapped;
}

test(`executable/netconf: ${COUNTS.netconf} runs with mutated netconfs exit 0 or with error 1, 6, 7 or 11, and leave nothing`, async (t) => {
  const { etcd, network, node, dir } = await setup(t, 'fuzzconf');
  mkdirSync(join(dir, 'log'));
  const seeds = [
    ipamNetconf(etcd, { name: network, node, extra: { log_file_path: 'cni.log', log_level: 'debug', mtu: 1400 } }),
    {
      cniVersion: '1.0.0',
      name: network,
      type: 'netplug',
      nodename: node,
      ipam: { type: 'host-local', dataDir: 'state', ranges: [[{ subnet: uniqueSubnet4() }]], routes: [{ dst: '0.0.0.0/0' }] },
    },
    {
      ...ipamNetconf(etcd, { name: network, node, version: '0.3.1', ipam: { ipv4_pools: ['fuzz'] } }),
      num_queues: 2,
      container_settings: { allow_ip_forwarding: true },
    },
  ];
  const findings = await runCases(t, 'executable/netconf', COUNTS.netconf, async (rng, index) => {
    const netns = addNetns();
    try {
      const env = runtimeEnv('n', index, netns.path);
      const seed = rng.pick(seeds) as Record<string, unknown>;
      const conf = sandboxed(mutateValue(rng, seed, NETCONF_FIELDS), dir, etcd, rng);
      const bytes = damageBytes(rng, serialize(conf));
      const hostName = derivedHostName(env);
      return await inTurnFor(hostName, async () => {
        const problems = await attachment(env, bytes, [1, 6, 7, 11], { cwd: dir });
        problems.push(...leftovers(netns, hostName, false));
        return { problems, input: shorten(bytes.toString('utf8'), 400) };
      });
    } finally {
      netns.remove();
    }
  });
  datastoreClean(t, etcd);
  verdict(t, 'executable/netconf', COUNTS.netconf, findings);
});

test(`executable/cni-args: ${COUNTS.cniArgs} runs with mutated CNI_ARGS exit 0 or with error 4, 7, 103 or 105, and leave nothing`, async (t) => {
  const { etcd, network, node, dir } = await setup(t, 'fuzzargs');
  const netconf = Buffer.from(JSON.stringify(ipamNetconf(etcd, { name: network, node })));
  const findings = await runCases(t, 'executable/cni-args', COUNTS.cniArgs, async (rng, index) => {
    const netns = addNetns();
    try {
      const env = { ...runtimeEnv('a', index, netns.path), CNI_ARGS: envSafe(mutatedArgs(rng)) };
      const hostName = derivedHostName(env);
      return await inTurnFor(hostName, async () => {
        const hostBefore = hostName !== undefined && hostLinkExists(hostName);
        const problems = await attachment(env, netconf, [4, 7, 103, 105], { cwd: dir });
        problems.push(...leftovers(netns, hostName, hostBefore));
        return { problems, input: `CNI_ARGS=${shorten(env.CNI_ARGS, 300)}` };
      });
    } finally {
      netns.remove();
    }
  });
  datastoreClean(t, etcd);
  verdict(t, 'executable/cni-args', COUNTS.cniArgs, findings);
});

test(`executable/datastore documents: ${COUNTS.documents} ADD/DEL pairs over corrupted pool, node, block, affinity and handle documents in etcd give success or error 7, 100 or 103, never 999`, async (t) => {
  const { etcd, network, node, dir } = await setup(t, 'fuzzdocs');
  const client = new Etcd3({ hosts: etcd.endpoints });
  t.teardown(() => client.close());
  const pool = (await client.get('/netplug/resources/v3/projectnet.org/ippools/fuzz').json()) as typeof POOL;
  const cidr = pool.spec.cidr;
  const firstBlock = `${cidr.split('/')[0]}/26`;
  const netconf = Buffer.from(JSON.stringify(ipamNetconf(etcd, { name: network, node })));
  const prefix = '/netplug/';
  // Documents are corrupted one at a time (the file runs two cases at once: each its own turn).
  const documentTurn = limiter(1);
  const findings = await runCases(t, 'executable/datastore-documents', COUNTS.documents, (rng, index) =>
    documentTurn(async () => {
      const netns = addNetns();
      const env = runtimeEnv('d', index, netns.path);
      const handleKey = `${network}.${env['CNI_CONTAINERID']}`;
      const [key, seed]: [string, Record<string, unknown>] = rng.pick([
        ['/netplug/resources/v3/projectnet.org/ippools/fuzz', pool as unknown as Record<string, unknown>],
        [`/netplug/resources/v3/projectnet.org/ippools/other`, { ...POOL, metadata: { ...POOL.metadata, name: 'other' } }],
        [`/netplug/resources/v3/projectnet.org/nodes/${node}`, { ...NODE, metadata: { ...NODE.metadata, name: node } }],
        [`/netplug/ipam/v2/assignment/ipv4/block/${firstBlock.replace('/', '-')}`, block(firstBlock, node, 'someone.else')],
        [`/netplug/ipam/v2/host/${node}/ipv4/block/${firstBlock.replace('/', '-')}`, AFFINITY],
        [`/netplug/ipam/v2/handle/${handleKey}`, handle(handleKey, firstBlock)],
      ]);
      const text = rng.chance(0.85)
        ? serialize(mutateValue(rng, seed))
        : rng.pick(['', 'null', '[]', '"x"', '{', new RawJson('1').text, EDGE_STRINGS[4] ?? '']);
      try {
        // The pool stays what ADD allocates from unless it is the document under test.
        await client.put(key).value(text);
        const hostName = derivedHostName(env);
        const problems = await attachment(env, netconf, [7, 100, 103, 104], { delCodes: [100, 103], cwd: dir });
        problems.push(...leftovers(netns, hostName, false));
        return { problems, input: `${key} = ${shorten(text, 300)}` };
      } finally {
        netns.remove();
        // Back to the pool alone: the next case starts from a clean datastore.
        await client.delete().prefix(`${prefix}ipam/`);
        await client.delete().key(key);
        await client.put('/netplug/resources/v3/projectnet.org/ippools/fuzz').value(JSON.stringify(pool));
      }
    }),
  );
  datastoreClean(t, etcd);
  verdict(t, 'executable/datastore-documents', COUNTS.documents, findings);
});
