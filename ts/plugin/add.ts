// ADD: addresses from IPAM, then the data plane, then the result. Any failure after IPAM releases
// the addresses again (the data plane undoes its own partial work), so a failed ADD leaves nothing.
import { CniError, ErrorCode } from '../cni/errors.ts';
import type { Result } from '../cni/result.ts';
import { interfaceExists, setupWorkload } from '../dataplane/index.ts';
import { workloadMtu, type PluginContext } from './context.ts';
import { toCniError } from './dataplane-errors.ts';
import { hostInterfaceName } from './host-interface.ts';

export async function cmdAdd(ctx: PluginContext): Promise<Result> {
  const { env, conf, log } = ctx;
  if (await interfaceExists(env.netns, env.ifname).catch((err: unknown) => Promise.reject(toCniError(err)))) {
    throw new CniError(
      ErrorCode.KernelFailure,
      `interface "${env.ifname}" already exists in ${env.netns}; DEL the attachment before adding it again`,
    );
  }
  const allocated = await ctx.ipam.add();
  const addresses = (allocated.ips ?? []).map((ip) => ip.address.split('/')[0] ?? ip.address);
  const mtu = workloadMtu(conf);
  const routes = requestedRoutes(ctx, allocated);
  const hostIfname = hostInterfaceName(env);
  try {
    if (addresses.length === 0) {
      throw new CniError(ErrorCode.IpamFailure, `IPAM plugin ${conf.ipam.type} returned no IP addresses`);
    }
    const made = await setupWorkload({
      netns: env.netns,
      containerIfname: env.ifname,
      hostIfname,
      addresses,
      numQueues: conf.num_queues,
      allowIpForwarding: conf.container_settings.allow_ip_forwarding,
      ...(mtu !== undefined ? { mtu } : {}),
      ...(routes ? { routes } : {}),
    });
    log.info('workload networked', { container: env.containerId, netns: env.netns, interface: env.ifname, hostInterface: hostIfname, addresses });
    const dns = allocated.dns ?? dnsFromNetconf(ctx);
    return {
      cniVersion: conf.cniVersion,
      interfaces: [
        { name: made.host.name, mac: made.host.mac },
        { name: env.ifname, mac: made.container.mac, mtu: made.mtu, sandbox: env.netns },
      ],
      ips: addresses.map((address) => ({ address: `${address}/${address.includes(':') ? 128 : 32}`, interface: 1 })),
      routes: made.routes.map((route) => ({ dst: route.destination, gw: route.gateway })),
      ...(dns ? { dns } : {}),
    };
  } catch (err) {
    const failure = toCniError(err);
    await ctx.ipam.del().catch((release: unknown) => {
      const reason = toCniError(release).message;
      log.error('rolling back ADD: releasing the addresses failed', { addresses, reason });
      failure.details ??= `releasing ${addresses.join(', ')} again also failed: ${reason}`;
    });
    log.error(`ADD failed; addresses ${addresses.join(', ') || '(none)'} released`, { code: failure.code, reason: failure.message });
    throw failure;
  }
}

/**
 * Routes for the workload: the IPAM result's (host-local echoes its `routes`), gateways ignored as
 * every route goes via the link-local next hop; none means the default route of each family.
 */
function requestedRoutes(ctx: PluginContext, allocated: Result): string[] | undefined {
  const fromIpam = (allocated.routes ?? []).map((route) => route.dst);
  if (fromIpam.length === 0) return undefined;
  return ctx.conf.include_default_routes ? ['0.0.0.0/0', '::/0', ...fromIpam] : fromIpam;
}

function dnsFromNetconf(ctx: PluginContext): Result['dns'] | undefined {
  const dns = ctx.netconf.json['dns'];
  return dns && typeof dns === 'object' && Object.keys(dns).length > 0 ? (dns as Result['dns']) : undefined;
}
