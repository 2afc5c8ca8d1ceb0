// ADD: addresses from IPAM, then the data plane, then (with a datastore) the workload endpoint.
// Any failure after IPAM undoes what was done: the interface is removed, the addresses released,
// so a failed ADD leaves nothing.
import { CniError, ErrorCode } from '../cni/errors.ts';
import type { Result } from '../cni/result.ts';
import { interfacePresence, setupWorkload, teardownWorkload, type Presence } from '../dataplane/index.ts';
import type { Companion } from '../ipam/allocator.ts';
import { parseIp } from '../ipam/cidr.ts';
import { keys } from '../ipam/model.ts';
import { workloadMtu, type PluginContext } from './context.ts';
import { toCniError } from './errors.ts';
import { hostInterfaceName } from './host-interface.ts';
import { CNI_ENDPOINT_NAMESPACE, deleteWorkloadEndpoint, workloadEndpoint, workloadEndpointName, writeWorkloadEndpoint, type WorkloadEndpoint } from './workload-endpoint.ts';

/** `presence`: the interface name's presence, if already being looked up (early work). */
export async function cmdAdd(ctx: PluginContext, presence?: Promise<Presence>): Promise<Result> {
  const { env, conf, log } = ctx;
  const hostIfname = hostInterfaceName(env);
  ctx.warmUp();
  const found = await (presence ?? interfacePresence(env.netns, env.ifname, hostIfname)).catch((err: unknown) => Promise.reject(toCniError(err)));
  if (found !== 'absent') {
    // A repeated ADD of this very attachment (a runtime retrying after a timeout) is re-wired with
    // the addresses it already holds. Anything else in the interface's place is left alone.
    const repeated = found === 'attached' && ctx.ipam.holdsAddresses !== undefined && (await ctx.ipam.holdsAddresses());
    if (!repeated) {
      throw new CniError(ErrorCode.KernelFailure, `interface "${env.ifname}" already exists in ${env.netns}; DEL the attachment before adding it again`);
    }
    log.info('repeated ADD: re-wiring the attachment with the addresses it holds', { container: env.containerId, interface: env.ifname });
    await teardownWorkload(env.netns, env.ifname).catch((err: unknown) => Promise.reject(toCniError(err)));
  }

  const endpoint = ctx.usesDatastore ? workloadEndpointOf(ctx, hostIfname) : undefined;
  const withAddresses = endpoint && ctx.ipam.commitsCompanions ? [endpoint] : [];
  const allocated = await ctx.ipam.add(withAddresses);
  const addresses = (allocated.ips ?? []).map((ip) => ip.address.split('/')[0] ?? ip.address);
  const mtu = workloadMtu(conf);
  const routes = requestedRoutes(ctx, allocated);
  let wired = false;
  try {
    if (addresses.length === 0) {
      throw new CniError(ErrorCode.IpamFailure, `IPAM plugin ${conf.ipam.type} returned no IP addresses`);
    }
    const made = await setupWorkload({
      netns: env.netns,
      containerIfname: env.ifname,
      hostIfname,
      addresses,
      containerMac: macFor(addresses),
      numQueues: conf.num_queues,
      allowIpForwarding: conf.container_settings.allow_ip_forwarding,
      ...(mtu !== undefined ? { mtu } : {}),
      ...(routes ? { routes } : {}),
    });
    wired = true;
    const ipNetworks = addresses.map(hostNetwork);
    if (endpoint && withAddresses.length === 0) {
      await writeWorkloadEndpoint(await ctx.store(), endpoint.value(addresses, undefined) as WorkloadEndpoint);
    }
    log.info('workload networked', { container: env.containerId, netns: env.netns, interface: env.ifname, hostInterface: hostIfname, addresses });
    const dns = allocated.dns ?? dnsFromNetconf(ctx);
    return {
      cniVersion: conf.cniVersion,
      interfaces: [
        { name: made.host.name, mac: made.host.mac },
        { name: env.ifname, mac: made.container.mac, mtu: made.mtu, sandbox: env.netns },
      ],
      ips: ipNetworks.map((address) => ({ address, interface: 1 })),
      routes: made.routes.map((route) => ({ dst: route.destination, gw: route.gateway })),
      ...(dns ? { dns } : {}),
    };
  } catch (err) {
    throw await rollBack(ctx, toCniError(err, 'ADD'), { addresses, wired, endpoint: endpoint !== undefined });
  }
}

/** Undoes a failed ADD: the interface (if made), then the addresses. The failure is what is reported. */
async function rollBack(ctx: PluginContext, failure: CniError, done: { addresses: string[]; wired: boolean; endpoint: boolean }): Promise<CniError> {
  const { env, log } = ctx;
  const problems: string[] = [];
  if (done.wired) await teardownWorkload(env.netns, env.ifname).catch((err: unknown) => problems.push(`removing "${env.ifname}": ${toCniError(err).message}`));
  if (done.endpoint && failure.code !== ErrorCode.TryAgainLater) {
    const name = workloadEndpointName(ctx.node, 'cni', env.containerId, env.ifname);
    await ctx
      .store()
      .then((store) => deleteWorkloadEndpoint(store, CNI_ENDPOINT_NAMESPACE, name, env.containerId))
      .catch((err: unknown) => problems.push(`removing workload endpoint ${name}: ${toCniError(err).message}`));
  }
  // An unreachable datastore cannot take the addresses back now; the runtime's DEL or GC will.
  if (failure.code !== ErrorCode.TryAgainLater) {
    await ctx.ipam.del().catch((err: unknown) => problems.push(`releasing ${done.addresses.join(', ')}: ${toCniError(err).message}`));
  }
  if (problems.length > 0) {
    log.error('rolling back ADD also failed', { problems });
    failure.details = [failure.details, ...problems.map((p) => `undoing the ADD failed too: ${p}`)].filter(Boolean).join('; ');
  }
  log.error(`ADD failed and was undone; addresses ${done.addresses.join(', ') || '(none)'} released`, { code: failure.code, reason: failure.message });
  return failure;
}

/** The pod's workload endpoint, built once its addresses are known. */
function workloadEndpointOf(ctx: PluginContext, hostIfname: string): Companion {
  const { env, conf, node } = ctx;
  const name = workloadEndpointName(node, 'cni', env.containerId, env.ifname);
  return {
    key: keys.workloadEndpoint(CNI_ENDPOINT_NAMESPACE, name),
    value: (addresses, current) => {
      const spec = {
        orchestrator: 'cni',
        workload: env.containerId,
        node,
        containerID: env.containerId,
        pod: '',
        endpoint: env.ifname,
        interfaceName: hostIfname,
        mac: macFor(addresses),
        ipNetworks: addresses.map(hostNetwork),
        profiles: [conf.name],
      };
      const made = workloadEndpoint(CNI_ENDPOINT_NAMESPACE, spec);
      // A repeated ADD updates the endpoint; it keeps its creation time.
      const created = (current as WorkloadEndpoint | undefined)?.metadata.creationTimestamp;
      return created ? { ...made, metadata: { ...made.metadata, creationTimestamp: created } } : made;
    },
  };
}

const hostNetwork = (address: string) => `${address}/${address.includes(':') ? 128 : 32}`;

/**
 * The pod's MAC: 0a:58 and the last four bytes of its first address (the convention of
 * ovn-kubernetes and the bridge plugin's). Known before the interface exists, so the workload
 * endpoint that records it commits with the addresses; stable for an address, so neighbours'
 * caches stay right when a pod is re-created with it. Unique on each veth, the only link it is on.
 */
export function macFor(addresses: readonly string[]): string {
  const first = parseIp(addresses[0] ?? '');
  const value = first?.value ?? 0n;
  const tail = [24n, 16n, 8n, 0n].map((shift) => Number((value >> shift) & 0xffn));
  return [0x0a, 0x58, ...tail].map((b) => b.toString(16).padStart(2, '0')).join(':');
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
