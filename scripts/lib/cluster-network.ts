// The test cluster node's network namespace, and its CNI plugin directory.
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

export function linkSystemPlugins(binDir: string): void {
  for (const plugin of readdirSync('/usr/lib/cni')) {
    if (!existsSync(join(binDir, plugin))) symlinkSync(join('/usr/lib/cni', plugin), join(binDir, plugin));
  }
}
