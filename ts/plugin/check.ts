// CHECK: the attachment described by prevResult still exists as ADD made it: the allocation (asked
// of IPAM), both veth ends, addresses, routes and sysctls (read back from the kernel).
import { CniError, ErrorCode } from '../cni/errors.ts';
import { parseResult } from '../cni/result.ts';
import { checkWorkload } from '../dataplane/index.ts';
import type { PluginContext } from './context.ts';
import { toCniError } from './errors.ts';
import { hostInterfaceName } from './host-interface.ts';

/** The next hops netplug routes through; routes via anything else belong to someone else. */
const NEXT_HOPS = new Set(['169.254.1.1', 'fe80::ecee:eeff:feee:eeee']);

export async function cmdCheck(ctx: PluginContext): Promise<void> {
  const { env, conf } = ctx;
  if (conf.prevResult === undefined) {
    throw new CniError(ErrorCode.InvalidConfig, 'CHECK needs the result of ADD in netconf field "prevResult"');
  }
  const previous = parseResult(conf.prevResult, conf.cniVersion, 'prevResult');
  const index = (previous.interfaces ?? []).findIndex((i) => i.name === env.ifname && i.sandbox === env.netns);
  if (index < 0) {
    throw new CniError(ErrorCode.InvalidConfig, `prevResult lists no interface "${env.ifname}" in ${env.netns}`);
  }
  const addresses = (previous.ips ?? []).filter((ip) => ip.interface === index).map((ip) => ip.address.split('/')[0] ?? ip.address);
  if (addresses.length === 0) {
    throw new CniError(ErrorCode.InvalidConfig, `prevResult lists no addresses on interface "${env.ifname}"`);
  }
  await ctx.ipam.check();
  // parseNetconf resolved it: the netconf's, auto for 0, else the node agent's file, else the kernel default.
  const mtu = conf.mtu;
  const differences = await checkWorkload({
    netns: env.netns,
    containerIfname: env.ifname,
    hostIfname: hostInterfaceName(env),
    addresses,
    routes: (previous.routes ?? []).filter((r) => r.gw !== undefined && NEXT_HOPS.has(r.gw)).map((r) => r.dst),
    numQueues: conf.num_queues,
    allowIpForwarding: conf.container_settings.allow_ip_forwarding,
    ...(mtu !== undefined ? { mtu } : {}),
  }).catch((err: unknown) => Promise.reject(toCniError(err)));
  const [first] = differences;
  if (first) {
    const describe = (d: typeof first) => `${d.subject}: expected ${d.expected}, found ${d.actual}`;
    throw new CniError(
      ErrorCode.CheckFailed,
      `"${env.ifname}" in ${env.netns} is not as ADD left it: ${describe(first)}${differences.length > 1 ? ` (and ${differences.length - 1} more)` : ''}`,
      differences.map(describe).join('; '),
    );
  }
}
