// The test cluster nodes' network namespaces (one node alone, or several behind a router), and
// their CNI plugin directory.
import { execFile } from 'node:child_process';
import { existsSync, readdirSync, symlinkSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

/** The node's network namespace: loopback, the node address on a veth pair, a default route, forwarding. */
export async function makeNodeNetwork(netns: string, nodeIp: string): Promise<void> {
  const ip = (...args: string[]) => run('ip', ['-n', netns, ...args]);
  await run('ip', ['netns', 'add', netns]);
  await ip('link', 'set', 'lo', 'up');
  // No dummy driver on these kernels: a veth pair with both ends in the namespace carries the address.
  await ip('link', 'add', 'node0', 'type', 'veth', 'peer', 'name', 'node0-peer');
  await ip('addr', 'add', `${nodeIp}/24`, 'dev', 'node0');
  await ip('link', 'set', 'node0', 'up');
  await ip('link', 'set', 'node0-peer', 'up');
  // Host-network clients pick their source address for ClusterIPs from this route.
  await ip('route', 'add', 'default', 'via', '10.250.0.254', 'dev', 'node0');
  await run('nsenter', [`--net=/run/netns/${netns}`, '--', 'sysctl', '-q', '-w', 'net.ipv4.ip_forward=1']);
}

/**
 * A cluster of several nodes (cluster-nodes.ts): subnet A on one bridge, subnet B on another, both
 * in a router namespace (<cluster>-r) that forwards between them from each gateway (.254). Pods'
 * addresses are unknown to it: traffic between pods crosses it only encapsulated.
 */
export const SUBNETS = ['10.250.0', '10.250.1'] as const;

/**
 * A dual-stack cluster's (ClusterOptions.dualStack) IPv6 /64s of subnets A and B: a node's address
 * is `<subnet>::<its number>`, the router's `<subnet>::fe`.
 */
export const SUBNETS6 = ['fd00:250:0', 'fd00:250:1'] as const;

/** The router namespace, with one bridge per subnet (with `dualStack`, an IPv6 address on each and IPv6 forwarding too). */
export async function makeRouter(router: string, dualStack = false): Promise<void> {
  const ip = (...args: string[]) => run('ip', ['-n', router, ...args]);
  await run('ip', ['netns', 'add', router]);
  await ip('link', 'set', 'lo', 'up');
  for (const [index, subnet] of SUBNETS.entries()) {
    await ip('link', 'add', `br${index}`, 'type', 'bridge');
    await ip('addr', 'add', `${subnet}.254/24`, 'dev', `br${index}`);
    if (dualStack) await ip('addr', 'add', `${SUBNETS6[index]}::fe/64`, 'dev', `br${index}`, 'nodad');
    await ip('link', 'set', `br${index}`, 'up');
  }
  await run('nsenter', [`--net=/run/netns/${router}`, '--', 'sysctl', '-q', '-w', 'net.ipv4.ip_forward=1']);
  if (dualStack) await run('nsenter', [`--net=/run/netns/${router}`, '--', 'sysctl', '-q', '-w', 'net.ipv6.conf.all.forwarding=1']);
}

/**
 * A node's network namespace on the router's bridge for its subnet: eth0 with the node's address
 * (a name autodetection takes, unlike node0's veth prefix), the gateway as default route, forwarding.
 * With `nodeIp6` (a dual-stack cluster), the same in IPv6: the address without duplicate address
 * detection (usable at once), the router's `::fe` as default route, IPv6 forwarding.
 */
export async function plugNode(router: string, netns: string, port: string, nodeIp: string, nodeIp6?: string): Promise<void> {
  const subnet = SUBNETS.findIndex((prefix) => nodeIp.startsWith(`${prefix}.`));
  if (subnet < 0) throw new Error(`${nodeIp} is on neither subnet`);
  const ip = (...args: string[]) => run('ip', ['-n', netns, ...args]);
  await run('ip', ['netns', 'add', netns]);
  await ip('link', 'set', 'lo', 'up');
  await run('ip', ['-n', router, 'link', 'add', port, 'type', 'veth', 'peer', 'name', 'eth0', 'netns', netns]);
  await run('ip', ['-n', router, 'link', 'set', port, 'master', `br${subnet}`, 'up']);
  await ip('addr', 'add', `${nodeIp}/24`, 'dev', 'eth0');
  await ip('link', 'set', 'eth0', 'up');
  await ip('route', 'add', 'default', 'via', `${SUBNETS[subnet]}.254`, 'dev', 'eth0');
  await run('nsenter', [`--net=/run/netns/${netns}`, '--', 'sysctl', '-q', '-w', 'net.ipv4.ip_forward=1']);
  if (!nodeIp6) return;
  await ip('addr', 'add', `${nodeIp6}/64`, 'dev', 'eth0', 'nodad');
  await ip('-6', 'route', 'add', 'default', 'via', `${SUBNETS6[subnet]}::fe`, 'dev', 'eth0');
  await run('nsenter', [`--net=/run/netns/${netns}`, '--', 'sysctl', '-q', '-w', 'net.ipv6.conf.all.forwarding=1']);
}

export function linkSystemPlugins(binDir: string): void {
  for (const plugin of readdirSync('/usr/lib/cni')) {
    if (!existsSync(join(binDir, plugin))) symlinkSync(join('/usr/lib/cni', plugin), join(binDir, plugin));
  }
}
