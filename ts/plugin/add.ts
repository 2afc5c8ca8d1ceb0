// ADD: readiness gates, what Kubernetes says about the pod, addresses (with the workload endpoint,
// when the address manager commits it), the data plane, the host's part (netplug-node's policy,
// when it serves the call, begun as soon as the addresses are planned), then the policy wait. Any
// failure after addresses are taken undoes what was done: the interface is removed, the endpoint
// and the addresses released, the host's part withdrawn, so a failed ADD leaves nothing.
import { CniError, ErrorCode } from '../cni/errors.ts';
import type { Result } from '../cni/result.ts';
import { addHostRoutes, interfacePresence, setupWorkload, type Presence } from '../dataplane/index.ts';
import { teardownAttachment } from '../dataplane/ownership.ts';
import { CLUSTER_INFO_KEY, datastoreLocked } from '../model/cluster-information.ts';
import { datastoreLockedError } from '../ipam/cluster-info.ts';
import type { AddressPlan } from '../k8s/annotations.ts';
import type { PluginContext } from './context.ts';
import { endpointCompanion, hostNetwork, macFor } from './endpoint.ts';
import { toCniError } from './errors.ts';
import { hostInterfaceName } from './host-interface.ts';
import { podFacts } from './kubernetes.ts';
import { statusFileName, waitForPolicy } from './policy-wait.ts';
import { waitForReadinessGates } from './readiness.ts';
import { WiringAhead } from './wire-ahead.ts';
import { deleteWorkloadEndpoint, writeWorkloadEndpoint } from './workload-endpoint.ts';
import type { WorkloadEndpoint } from '../model/workload-endpoint.ts';

/** `presence`: the interface name's presence, if already being looked up (early work). */
export async function cmdAdd(ctx: PluginContext, presence?: Promise<Presence>): Promise<Result> {
  const { env, conf, log, workload } = ctx;
  const hostIfname = hostInterfaceName(env);
  ctx.warmUp();
  const found = await (presence ?? interfacePresence(env.netns, env.ifname, hostIfname)).catch((err: unknown) =>
    Promise.reject(toCniError(err)),
  );
  if (found !== 'absent') {
    // A repeated ADD of this very attachment (a runtime retrying after a timeout) is re-wired with
    // the addresses it already holds. Anything else in the interface's place is left alone.
    const repeated = found === 'attached' && ctx.ipam.holdsAddresses !== undefined && (await ctx.ipam.holdsAddresses());
    if (!repeated) {
      throw new CniError(
        ErrorCode.KernelFailure,
        `interface "${env.ifname}" already exists in ${env.netns}; DEL the attachment before adding it again`,
      );
    }
    log.info('repeated ADD: re-wiring the attachment with the addresses it holds', { container: env.containerId, interface: env.ifname });
    await teardownAttachment(env.netns, env.ifname, hostIfname).catch((err: unknown) => Promise.reject(toCniError(err)));
  }
  // Nothing is allocated before the gates pass, or while the pod's annotations could refuse it,
  // or while a migration has the datastore locked (netplug-ipam reads that with its first reads).
  ctx.ipam.requirePlugin?.();
  const [facts] = await Promise.all([
    podFacts(ctx),
    waitForReadinessGates(conf.readiness_gates ?? [], conf.readiness_gate_timeout_seconds, log),
    ctx.usesDatastore && !ctx.ipam.commitsCompanions ? refuseWhileLocked(ctx) : undefined,
  ]);
  const { plan, pod } = facts;
  // Addresses from ipAddrsNoIpam bypass netplug-ipam's read of the lock, not the lock.
  if (plan.ipsWithoutIpam && ctx.usesDatastore && ctx.ipam.commitsCompanions) await refuseWhileLocked(ctx);

  const endpoint = ctx.usesDatastore ? endpointCompanion(ctx, { hostIfname, pod, floatingIps: plan.floatingIps }) : undefined;
  const committed = endpoint !== undefined && ctx.ipam.commitsCompanions && !plan.ipsWithoutIpam;
  // parseNetconf resolved it: the netconf's, auto for 0, else the node agent's file, else the kernel default.
  const mtu = conf.mtu;
  const wire = (addresses: readonly string[], routes?: string[], hostRoutes = true) =>
    setupWorkload({
      netns: env.netns,
      containerIfname: env.ifname,
      hostIfname,
      addresses: [...addresses],
      containerMac: macFor(addresses),
      numQueues: conf.num_queues,
      allowIpForwarding: conf.container_settings.allow_ip_forwarding,
      ...(mtu !== undefined ? { mtu } : {}),
      ...(routes ? { routes } : {}),
      ...(hostRoutes ? {} : { hostRoutes }),
    });
  // A manager that commits says what it is committing: the interface is set up meanwhile.
  const ahead = plan.ipsWithoutIpam
    ? undefined
    : new WiringAhead(
        (addresses) => wire(addresses, undefined, false),
        (addresses) => addHostRoutes(hostIfname, addresses),
        () => teardownAttachment(env.netns, env.ifname, hostIfname),
      );
  // The host starts on the pod's part (its policy) with the plan too; a failed ADD withdraws it. A
  // plan made again with other addresses (a conflict at the commit) withdraws the first: addresses
  // the pod will not hold must not stand for it in its peers' sets, not even until the answer.
  let withdraw: (() => void) | undefined;
  let plannedAddresses = '';
  const planned = (addresses: readonly string[]) => {
    ahead?.planned(addresses);
    if (!workload.pod || !ctx.workloadPlanned || addresses.length === 0 || addresses.join() === plannedAddresses) return;
    withdraw?.();
    plannedAddresses = addresses.join();
    withdraw = ctx.workloadPlanned({
      namespace: workload.namespace,
      pod: workload.pod,
      ...(env.args.podUid ? { podUid: env.args.podUid } : {}),
      containerInterface: env.ifname,
      hostInterface: hostIfname,
      mac: macFor(addresses),
      addresses: [...addresses],
    });
  };
  const allocated = plan.ipsWithoutIpam
    ? withoutIpam(conf.cniVersion, plan.ipsWithoutIpam)
    : await ctx.ipam.add(committed ? [endpoint] : [], overrides(plan), { planned }).catch(async (err: unknown) => {
        withdraw?.();
        await ahead?.abandon().catch((undo: unknown) => log.error(`removing "${env.ifname}" set up ahead: ${toCniError(undo).message}`));
        throw err;
      });
  const addresses = (allocated.ips ?? []).map((ip) => ip.address.split('/')[0] ?? ip.address);
  const routes = requestedRoutes(ctx, allocated);
  let wired = false;
  let endpointWritten = committed;
  try {
    if (addresses.length === 0) {
      await ahead?.abandon();
      throw new CniError(ErrorCode.IpamFailure, `IPAM plugin ${conf.ipam.type} returned no IP addresses`);
    }
    // Made ahead only without routes of the manager's (netplug-ipam gives none). Rolled back as
    // wired from here: removing an attachment that is not there is success.
    wired = ahead?.started ?? false;
    if (routes) await ahead?.abandon();
    const made = (routes ? undefined : await ahead?.take(addresses)) ?? (await wire(addresses, routes));
    wired = true;
    if (endpoint && !committed) {
      endpointWritten = true;
      await writeWorkloadEndpoint(await ctx.store(), endpoint.value(addresses, undefined) as WorkloadEndpoint);
    }
    log.info('workload networked', {
      container: env.containerId,
      ...(workload.pod ? { pod: `${workload.namespace}/${workload.pod}` } : {}),
      netns: env.netns,
      interface: env.ifname,
      hostInterface: hostIfname,
      addresses,
    });
    if (workload.pod && ctx.workloadNetworked) {
      // The host's part is kernel work (netplug-node's nftables table); not code 11, which keeps
      // the addresses for a datastore that is away: here they are released with the rest.
      const unfinished = (err: unknown) =>
        Promise.reject(
          new CniError(ErrorCode.KernelFailure, `netplug-node could not finish networking the pod: ${(err as Error).message}`),
        );
      await ctx
        .workloadNetworked({
          namespace: workload.namespace,
          pod: workload.pod,
          ...(env.args.podUid ? { podUid: env.args.podUid } : {}),
          containerInterface: env.ifname,
          hostInterface: made.host.name,
          mac: made.container.mac,
          addresses,
        })
        .catch(unfinished);
    }
    if (workload.pod && conf.policy_setup_timeout_seconds > 0) {
      await waitForPolicy(
        conf.endpoint_status_dir,
        statusFileName('k8s', workload.namespace, workload.pod, env.ifname),
        conf.policy_setup_timeout_seconds,
        log,
      );
    }
    const dns = allocated.dns ?? dnsFromNetconf(ctx);
    return {
      cniVersion: conf.cniVersion,
      interfaces: [
        { name: made.host.name, mac: made.host.mac },
        { name: env.ifname, mac: made.container.mac, mtu: made.mtu, sandbox: env.netns },
      ],
      ips: addresses.map((address) => ({ address: hostNetwork(address), interface: 1 })),
      routes: made.routes.map((route) => ({ dst: route.destination, gw: route.gateway })),
      ...(dns ? { dns } : {}),
    };
  } catch (err) {
    withdraw?.();
    throw await rollBack(ctx, toCniError(err, 'ADD'), { addresses, wired, endpoint: endpointWritten });
  }
}

/** An ADD that writes to the datastore without netplug-ipam's first reads: refused while it is locked. */
async function refuseWhileLocked(ctx: PluginContext): Promise<void> {
  if (datastoreLocked(await (await ctx.store()).get(CLUSTER_INFO_KEY))) throw datastoreLockedError();
}

/** The address manager's part of the annotations' plan: pools, or exact addresses. */
function overrides(plan: AddressPlan) {
  return { ...(plan.pools ? { pools: plan.pools } : {}), ...(plan.ips ? { ips: plan.ips } : {}) };
}

/** ipAddrsNoIpam: the addresses as they are, no allocation (conflicts are the operator's). */
function withoutIpam(cniVersion: string, addresses: readonly string[]): Result {
  return { cniVersion, ips: addresses.map((address) => ({ address: hostNetwork(address) })) };
}

/** Undoes a failed ADD: the interface (if made), the endpoint, then the addresses. The failure is what is reported. */
async function rollBack(
  ctx: PluginContext,
  failure: CniError,
  done: { addresses: string[]; wired: boolean; endpoint: boolean },
): Promise<CniError> {
  const { env, log, workload } = ctx;
  const problems: string[] = [];
  if (done.wired)
    await teardownAttachment(env.netns, env.ifname, hostInterfaceName(env)).catch((err: unknown) =>
      problems.push(`removing "${env.ifname}": ${toCniError(err).message}`),
    );
  if (done.endpoint && failure.code !== ErrorCode.TryAgainLater) {
    await ctx
      .store()
      .then((store) => deleteWorkloadEndpoint(store, workload.namespace, workload.endpointName, env.containerId))
      .catch((err: unknown) => problems.push(`removing workload endpoint ${workload.endpointName}: ${toCniError(err).message}`));
  }
  // An unreachable datastore cannot take the addresses back now; the runtime's DEL or GC will.
  if (failure.code !== ErrorCode.TryAgainLater) {
    await ctx.ipam.del().catch((err: unknown) => problems.push(`releasing ${done.addresses.join(', ')}: ${toCniError(err).message}`));
  }
  if (problems.length > 0) {
    log.error('rolling back ADD also failed', { problems });
    failure.details = [failure.details, ...problems.map((p) => `undoing the ADD failed too: ${p}`)].filter(Boolean).join('; ');
  }
  log.error(`ADD failed and was undone; addresses ${done.addresses.join(', ') || '(none)'} released`, {
    code: failure.code,
    reason: failure.message,
  });
  return failure;
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
