// A container runtime's side of fault tests: pods on a real etcd in real namespaces, the plugin
// run as a runtime runs it (bounded in time and processes), and a runtime's retries: a failed ADD
// is undone with DEL and tried again; a failed DEL is tried again until it succeeds.
import { spawnSync } from 'node:child_process';

import type { ExecutionContext } from 'ava';

import { codeOf, type ExecOutcome, judgeRun, type Limits, runBounded } from '../fuzz/lib/exec.ts';
import { CNI_PATH, hostVeth } from './cni.ts';
import type { EtcdServer } from './etcd.ts';
import { addressesOf, ipamNetconf } from './ipam.ts';
import { containerId, createNetns, type TestNetns } from './kernel.ts';

export interface Pod {
  containerId: string;
  netns: TestNetns;
  netconf: Buffer;
}

/** `count` pods of network `name` on `etcd`, each in its own namespace (deleted at teardown). */
export function makePods(t: ExecutionContext, etcd: EtcdServer, count: number, name: string, extra: Record<string, unknown> = {}): Pod[] {
  const netconf = Buffer.from(JSON.stringify(ipamNetconf(etcd, { name, extra })));
  const pods = Array.from({ length: count }, () => ({ containerId: containerId(), netns: createNetns(t, name.slice(0, 6)), netconf }));
  // A host veth a failed test left behind goes with it.
  t.teardown(() => {
    for (const pod of pods) spawnSync('ip', ['link', 'del', hostVeth(pod.containerId)], { stdio: 'ignore' });
  });
  return pods;
}

export function run(pod: Pod, command: 'ADD' | 'DEL', limits: Limits = {}): Promise<ExecOutcome> {
  const env = {
    PATH: '/usr/sbin:/usr/bin:/sbin:/bin',
    CNI_COMMAND: command,
    CNI_CONTAINERID: pod.containerId,
    CNI_NETNS: pod.netns.path,
    CNI_IFNAME: 'eth0',
    CNI_PATH,
  };
  return runBounded(env, pod.netconf, { timeoutMs: 60_000, ...limits });
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** DEL until it succeeds, as a runtime does (up to `attempts`); the last outcome. */
export async function delWithRetries(pod: Pod, attempts = 20, pauseMs = 500): Promise<ExecOutcome> {
  let outcome = await run(pod, 'DEL');
  for (let i = 1; i < attempts && outcome.status !== 0; i++) {
    await sleep(pauseMs);
    outcome = await run(pod, 'DEL');
  }
  return outcome;
}

/** A failed ADD is undone with DEL and tried again, up to `attempts` ADDs; the last ADD's outcome. */
export async function addWithRetries(pod: Pod, first: ExecOutcome, attempts = 10, pauseMs = 500): Promise<ExecOutcome> {
  let outcome = first;
  for (let i = 1; i < attempts && outcome.status !== 0; i++) {
    await delWithRetries(pod);
    await sleep(pauseMs);
    outcome = await run(pod, 'ADD');
  }
  return outcome;
}

/** What a failure during a fault may be: success, or "try again later" (11); never a crash. */
export function faultProblem(outcome: ExecOutcome, allowed: readonly number[] = [11]): string | undefined {
  return judgeRun(outcome, allowed);
}

/** The pod's address from a successful ADD. */
export const addressOf = (outcome: ExecOutcome): string | undefined =>
  outcome.status === 0 ? addressesOf(JSON.parse(outcome.stdout))[0] : undefined;

/** Links a pod left: anything but lo in its namespace, its host veth. */
export function podLeftovers(pod: Pod): string[] {
  const inside = spawnSync('ip', ['-n', pod.netns.name, '-j', 'link', 'show'], { encoding: 'utf8' });
  const links =
    inside.status === 0 ? (JSON.parse(inside.stdout) as { ifname: string }[]).map((l) => l.ifname).filter((n) => n !== 'lo') : [];
  const host = hostVeth(pod.containerId);
  const hostLeft = spawnSync('ip', ['link', 'show', 'dev', host], { stdio: 'ignore' }).status === 0;
  return [...links.map((l) => `${pod.netns.name}:${l}`), ...(hostLeft ? [host] : [])];
}

export { codeOf };

/**
 * A burst of ADDs with `fault` injected once `afterCompleted` of them are through; then what a runtime does: every
 * failed ADD is undone and retried until it succeeds. Checks that each first attempt succeeded or
 * failed cleanly (11, or `alsoAllowed`), that every pod ends with its own address (none doubled,
 * one allocation per pod, `ipam check` clean), and that DELs then leave nothing.
 */
export async function burstUnderFault(
  t: ExecutionContext,
  etcd: EtcdServer,
  pods: readonly Pod[],
  fault: () => Promise<void>,
  options: { afterCompleted?: number; alsoAllowed?: readonly number[] } = {},
): Promise<void> {
  const { ctl, totalAllocated, etcdKeys } = await import('./ipam.ts');
  // The fault strikes once the first few ADDs are through: the rest are mid-way or yet to start.
  let completed = 0;
  let strike: () => void = () => undefined;
  const struck = new Promise<void>((resolve) => (strike = resolve));
  const burst = Promise.all(
    pods.map(async (pod) => {
      const outcome = await run(pod, 'ADD');
      if (++completed === (options.afterCompleted ?? 3)) strike();
      return outcome;
    }),
  );
  await Promise.race([struck, sleep(10_000)]);
  t.log(`fault injected after ${completed} of ${pods.length} ADDs completed`);
  await fault();
  const first = await burst;
  const codes = first.map((o) => (o.status === 0 ? 0 : (codeOf(o) ?? `exit ${o.status}${o.signal ? ` ${o.signal}` : ''}`)));
  t.log(
    `first attempts: ${codes.filter((c) => c === 0).length} of ${pods.length} succeeded; failure codes: ${JSON.stringify(codes.filter((c) => c !== 0))}`,
  );
  const problems = first.map((o) => faultProblem(o, [11, ...(options.alsoAllowed ?? [])])).filter(Boolean);
  t.deepEqual(problems, [], 'each ADD during the fault succeeded or failed with a CNI error telling the runtime to try again');

  const final = await Promise.all(pods.map((pod, i) => addWithRetries(pod, first[i] as ExecOutcome)));
  t.deepEqual(
    final.map((o) => o.status),
    pods.map(() => 0),
    `every pod is added after retries: ${final.find((o) => o.status !== 0)?.stdout}`,
  );
  const addresses = final.map(addressOf);
  t.is(new Set(addresses).size, pods.length, `no address handed out twice: ${addresses.join(' ')}`);
  t.is(totalAllocated(t, etcd), pods.length, 'one allocation per pod: none leaked by the failed attempts');
  const check = ctl(etcd, 'ipam', 'check', '--grace-period', '0');
  t.is(check.status, 0, `ipam check after the burst: ${check.stdout}`);

  const dels = await Promise.all(pods.map((pod) => delWithRetries(pod)));
  t.deepEqual(
    dels.map((d) => d.status),
    pods.map(() => 0),
  );
  t.is(totalAllocated(t, etcd), 0, 'nothing allocated after the DELs');
  t.deepEqual(await etcdKeys(t, etcd, '/netplug/ipam/v2/handle/'), [], 'no handle left');
  t.deepEqual(await etcdKeys(t, etcd, '/netplug/resources/v3/projectnet.org/workloadendpoints/'), [], 'no workload endpoint left');
  t.deepEqual(pods.flatMap(podLeftovers), [], 'no link left');
  const after = ctl(etcd, 'ipam', 'check', '--grace-period', '0');
  t.is(after.status, 0, `ipam check after the DELs: ${after.stdout}`);
}
