// Real namespaces for tests, and readers of kernel state through iproute2's JSON output: an
// observer independent of the code under test. Every namespace is deleted in t.teardown.
import { execFileSync, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, readlinkSync } from 'node:fs';

import type { ExecutionContext } from 'ava';

import { processSlot } from './slot.ts';

/** Fails (never skips) when not root: the namespace tests are the point of this suite. */
export function requireRoot(): void {
  if (process.getuid?.() !== 0) {
    throw new Error('these tests create network namespaces and links, and must run as root');
  }
}

let counter = 0;
const tag = (process.pid & 0xffff).toString(16).padStart(4, '0');

/** A host interface name unique to this process and call, at most 15 bytes. */
export function hostIfname(prefix = 'npa'): string {
  return `${prefix}${tag}${(counter++ % 1000).toString().padStart(3, '0')}`;
}

// Addresses and subnets made up per test file live in 100.64.0.0/10, which no test names itself
// (fixed subnets are all in 10.0.0.0/8): host routes are shared by every file running at once.
const fileOctet = (): number => 64 + processSlot();

/** An IPv4 address no concurrently running test file uses. */
export function uniqueV4(): string {
  const n = counter++;
  return `100.${fileOctet()}.${200 + (Math.floor(n / 250) % 56)}.${(n % 250) + 1}`;
}

/** An IPv6 address no concurrently running test file uses, in canonical form (as iproute2 prints). */
export function uniqueV6(): string {
  const group = ((process.pid % 0xfff0) + 1).toString(16); // never 0, never zero-padded
  return `fd00:a7a:${group}::${(counter++ + 1).toString(16)}`;
}

export interface TestNetns {
  name: string;
  path: string;
}

/** Creates a network namespace that the test's teardown deletes. */
export function createNetns(t: ExecutionContext, label = 'ns'): TestNetns {
  requireRoot();
  const name = `nptest-${label}-${process.pid}-${counter++}`;
  execFileSync('ip', ['netns', 'add', name]);
  t.teardown(() => {
    spawnSync('ip', ['netns', 'del', name]);
  });
  return { name, path: `/run/netns/${name}` };
}

/** Deletes a host link at teardown (for links a test makes in the host namespace). */
export function deleteLinkAtTeardown(t: ExecutionContext, name: string): void {
  t.teardown(() => {
    spawnSync('ip', ['link', 'del', name]);
  });
}

export function ip(args: string[], netns?: TestNetns): string {
  const full = netns ? ['-n', netns.name, ...args] : args;
  return execFileSync('ip', full, { encoding: 'utf8' });
}

function ipJson<T>(args: string[], netns?: TestNetns): T {
  const out = ip(['-j', ...args], netns).trim();
  return (out ? JSON.parse(out) : []) as T;
}

export interface LinkJson {
  ifindex: number;
  ifname: string;
  link_index?: number;
  mtu: number;
  operstate: string;
  address: string;
  num_tx_queues: number;
  num_rx_queues: number;
  linkinfo?: { info_kind: string };
}

export function link(name: string, netns?: TestNetns): LinkJson | undefined {
  const full = netns ? ['-n', netns.name] : [];
  const out = spawnSync('ip', [...full, '-j', '-d', 'link', 'show', 'dev', name], { encoding: 'utf8' });
  if (out.status !== 0) return undefined;
  return (JSON.parse(out.stdout) as LinkJson[])[0];
}

/** `ip/prefix` of each address on `dev`, with the `tentative` flag if set. */
export function addresses(dev: string, netns?: TestNetns): string[] {
  const json = ipJson<Array<{ addr_info: Array<{ local: string; prefixlen: number; tentative?: boolean }> }>>(
    ['addr', 'show', 'dev', dev],
    netns,
  );
  return (json[0]?.addr_info ?? []).map((a) => `${a.local}/${a.prefixlen}${a.tentative ? ' tentative' : ''}`);
}

/** Routes of the main table as `dst [via gw] dev d [scope s]` strings. */
export function routes(family: 4 | 6, netns?: TestNetns): string[] {
  const json = ipJson<Array<{ dst: string; gateway?: string; dev?: string; scope?: string }>>(
    [`-${family}`, 'route', 'show', 'table', 'main'],
    netns,
  );
  return json.map((r) => `${r.dst}${r.gateway ? ` via ${r.gateway}` : ''} dev ${r.dev}${r.scope ? ` scope ${r.scope}` : ''}`);
}

export function sysctl(key: string, netns?: TestNetns): string {
  const path = `/proc/sys/${key.replaceAll('.', '/')}`;
  if (!netns) return readFileSync(path, 'utf8').trim();
  return execFileSync('ip', ['netns', 'exec', netns.name, 'cat', path], { encoding: 'utf8' }).trim();
}

/** Entries of `/sys/class/net/<dev>/queues` (`ip netns exec` remounts /sys for the namespace). */
export function queues(dev: string, netns?: TestNetns): string[] {
  const path = `/sys/class/net/${dev}/queues`;
  const out = netns
    ? execFileSync('ip', ['netns', 'exec', netns.name, 'ls', path], { encoding: 'utf8' })
    : execFileSync('ls', [path], { encoding: 'utf8' });
  return out.split(/\s+/).filter(Boolean).sort();
}

/** One ping from the host (or from inside `netns`), true if answered. */
export function ping(address: string, netns?: TestNetns): boolean {
  const args = [address.includes(':') ? '-6' : '-4', '-c', '1', '-W', '2', address];
  const out = netns ? spawnSync('ip', ['netns', 'exec', netns.name, 'ping', ...args]) : spawnSync('ping', args);
  return out.status === 0;
}

/**
 * Threads of this process that are not in the namespace of the JS thread, by name. The addon's
 * dedicated threads are called `netplug-netns`; no other thread may ever appear here.
 */
export function threadsOutsideHostNamespace(): string[] {
  const task = (tid: string, file: string) => `/proc/${process.pid}/task/${tid}/${file}`;
  const host = readlinkSync(task(String(process.pid), 'ns/net'));
  const outside: string[] = [];
  for (const tid of readdirSync(`/proc/${process.pid}/task`)) {
    try {
      if (readlinkSync(task(tid, 'ns/net')) !== host) outside.push(readFileSync(task(tid, 'comm'), 'utf8').trim());
    } catch {
      // the thread ended while we looked
    }
  }
  return outside;
}

/** An IPv4 /24 no concurrently running test uses. */
export function uniqueSubnet4(): string {
  const n = counter++;
  return `100.${fileOctet()}.${n % 200}.0/24`;
}

/** An IPv6 /64 no concurrently running test uses. */
export function uniqueSubnet6(): string {
  return `fd00:c${((process.pid % 0xff0) + 1).toString(16)}:${(counter++ + 1).toString(16)}::/64`;
}

/** A container ID as runtimes make them (64 hex digits), unique per call. */
export function containerId(): string {
  return randomBytes(32).toString('hex');
}

/**
 * The nftables `nft` (an observer of netplug's table in tests; netplug itself never runs it). npm's
 * scripts put node_modules/.bin first on PATH, where another package's `nft` command lives.
 */
export function nftBinary(): string {
  const dirs = (process.env['PATH'] ?? '').split(':').filter((dir) => dir !== '' && !dir.includes('node_modules'));
  return [...dirs, '/usr/sbin'].map((dir) => `${dir}/nft`).find((path) => existsSync(path)) ?? '/usr/sbin/nft';
}
