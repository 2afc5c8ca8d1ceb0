// netplug-node's routes to other nodes' pods: every pass takes the cluster (nodes, blocks, pools)
// as the datastore's watch keeps it (cluster-feed.ts), computes what this node's kernel should
// hold (desired-routes.ts) and makes it so (ts/dataplane/routes.ts, level-triggered: routes of
// protocol 80 not wanted are removed), then the natOutgoing part of netplug's nftables table. A pass runs when a change
// alters what routes depend on, and every refresh interval, which also repairs what someone
// changed by hand. Without a feed in step (none, or its watch broken) a pass reads the datastore
// whole, every few seconds. The node's own address and tunnel addresses are published on the
// way, so other nodes can route here.
import { readFileSync } from 'node:fs';

import * as k8s from '@kubernetes/client-node';

import {
  deleteLink,
  ensureIpipDevice,
  ensureVxlanDevice,
  NETPLUG_ROUTE_PROTOCOL,
  syncFdb,
  syncNeighbors,
  syncRoutes,
} from '../../dataplane/routes.ts';
import type { NodeSpec } from '../../model/node.ts';
import { sleep } from '../follow-node.ts';
import type { Logger } from '../../log/logger.ts';
import type { Store } from '../../store/store.ts';
import { countsOf, desiredState, uses, type DesiredState, type LocalNode } from './desired-routes.ts';
import { NatOutgoing, natOutgoingRuleSet } from './nat-outgoing.ts';
import type { NftComposer } from '../../dataplane/nft-composer.ts';
import { formatNodeAddress, nodeAddress, type AddressSetting, type NodeAddress } from './node-address.ts';
import { publishAddresses, type Datastore } from './publish-addresses.ts';
import { digestOf, type ClusterFeed } from './cluster-feed.ts';
import { readCluster } from './read-cluster.ts';
import { ensureTunnelAddress, tunnelHandle, tunnelPools, vxlanMacOf } from './tunnel-addresses.ts';

export const IPIP_DEVICE = 'tunl0';
export const VXLAN_DEVICE = 'vxlan.netplug';
/** The reference's defaults (its Felix VXLANVNI and VXLANPort). */
export const VXLAN_VNI = 4096;
export const VXLAN_PORT = 4789;
const IPIP_OVERHEAD = 20;
const VXLAN_OVERHEAD = 50;
export const SYNC_INTERVAL_MS = 3_000;
/** With a feed: the pass that repairs the kernel when nothing changed (the reference's Felix refreshes every 90 s). */
export const REFRESH_INTERVAL_MS = 30_000;
/** Changes this close together make one pass (a burst of pods changes a block per pod). */
const COALESCE_MS = 200;

export interface RouteMetrics {
  setRoutes(kind: 'direct' | 'ipip' | 'vxlan' | 'masquerade', count: number): void;
}

export interface RouteSyncOptions {
  datastore: Datastore;
  store: Store;
  /** The Kubernetes API: the Node's InternalIP for autodetection, and the Kubernetes datastore's annotations. */
  kube: k8s.KubeConfig | undefined;
  nodeName: string;
  addressSetting: AddressSetting;
  log: Logger;
  metrics?: RouteMetrics;
  intervalMs?: number;
  /** The cluster as the datastore's watch keeps it: passes on its changes, and every `refreshMs`. */
  feed?: ClusterFeed;
  refreshMs?: number;
  /** netplug's nftables table, where natOutgoing's masquerade goes (its "nat" part). */
  tables: NftComposer;
}

export class RouteSync {
  readonly #options: RouteSyncOptions;
  #problem: string | undefined = 'routes to other nodes are not programmed yet';
  #notes = '';
  #address: NodeAddress | undefined;
  #internalIps: string[] | undefined;
  /**
   * Devices this agent made, removed once no longer wanted. Not those of an earlier run: a host's
   * tunl0 may serve something else, and a stale device without routes carries nothing.
   */
  #devices = new Set<string>();
  #last = '';
  /** What the last pass computed from (digestOf), when it came from the feed, and the feed's version then. */
  #digest: string | undefined;
  #seen = 0;
  readonly #nat: NatOutgoing;

  constructor(options: RouteSyncOptions) {
    this.#options = options;
    this.#nat = new NatOutgoing(options.tables);
  }

  /** Why routes are not programmed (for /readiness), or undefined once the last pass succeeded. */
  notReady(): string | undefined {
    return this.#problem;
  }

  /** Passes until `signal` aborts; a failed pass is logged and the next one tries again. */
  async run(signal: AbortSignal): Promise<void> {
    const interval = this.#options.intervalMs ?? SYNC_INTERVAL_MS;
    while (!signal.aborted) {
      let problem: string | undefined;
      try {
        await this.pass();
      } catch (err) {
        problem = `routes to other nodes are not programmed: ${messageOf(err)}`;
      }
      if (problem !== this.#problem) {
        if (problem) this.#options.log.warning(problem);
        else this.#options.log.info('routes to other nodes are programmed');
      }
      this.#problem = problem;
      const feed = this.#options.feed;
      // A failed pass is tried again soon, changes or not.
      if (feed && !problem)
        await this.#untilDue(feed, signal).catch(async (err: unknown) => {
          this.#options.log.warning(`routes: following the datastore's changes failed (${messageOf(err)}); reading it again shortly`);
          await sleep(interval, signal);
        });
      else await sleep(interval, signal);
    }
  }

  /** Until a change alters what routes depend on (one heard during the last pass included), or the refresh is due. */
  async #untilDue(feed: ClusterFeed, signal: AbortSignal): Promise<void> {
    const due = AbortSignal.any([signal, AbortSignal.timeout(this.#options.refreshMs ?? REFRESH_INTERVAL_MS)]);
    const refresh = new Promise<void>((resolve) => due.addEventListener('abort', () => resolve(), { once: true }));
    while (!due.aborted) {
      await Promise.race([refresh, feed.next(this.#seen)]);
      if (due.aborted) return;
      await sleep(COALESCE_MS, signal);
      this.#seen = feed.version();
      const cluster = feed.current();
      // Out of step: read the datastore, as without a feed, until it is in step again.
      if (!cluster) return void (await sleep(this.#options.intervalMs ?? SYNC_INTERVAL_MS, signal));
      if (digestOf(cluster) !== this.#digest) return;
    }
  }

  /** One pass: read, compute, publish, apply. */
  async pass(): Promise<DesiredState> {
    const { store, nodeName, log } = this.#options;
    const address = await this.#localAddress();
    this.#seen = this.#options.feed?.version() ?? 0;
    const followed = this.#options.feed?.current();
    const cluster = followed ?? (await readCluster(store));
    this.#digest = followed && digestOf(followed);
    const labels = cluster.nodes.find((node) => node.name === nodeName)?.labels ?? {};
    const ipipPools = tunnelPools('ipip', cluster.pools, labels);
    const vxlanPools = tunnelPools('vxlan', cluster.pools, labels);
    const held = (tunnel: 'ipip' | 'vxlan') => cluster.tunnelAddresses.get(tunnelHandle(tunnel, nodeName));
    const ipipTunnelAddr = await ensureTunnelAddress(store, nodeName, 'ipip', ipipPools, held('ipip'));
    const vxlanTunnelAddr = await ensureTunnelAddress(store, nodeName, 'vxlan', vxlanPools, held('vxlan'));
    const local: LocalNode = { name: nodeName, address, interface: address.interface, ipipDevice: IPIP_DEVICE, vxlanDevice: VXLAN_DEVICE };
    const state = desiredState(local, cluster.nodes, cluster.blocks, cluster.pools);
    const notes = [...cluster.broken, ...state.notes].join('; ');
    if (notes !== this.#notes && notes) log.warning(`routes: ${notes}`);
    this.#notes = notes;

    // A device that cannot be made (a kernel without the driver) fails only the routes through it:
    // the others are still programmed, and the failure is the pass's (not ready, logged).
    const failures: string[] = [];
    const attempt = async <T>(what: () => Promise<T>): Promise<T | undefined> => {
      try {
        return await what();
      } catch (err) {
        failures.push((err as Error).message);
        return undefined;
      }
    };
    const underlayMtu = mtuOf(address.interface);
    let ipipUp = false;
    if (ipipTunnelAddr !== undefined || uses(state, 'ipip')) {
      const address = ipipTunnelAddr ? { address: `${ipipTunnelAddr}/32` } : {};
      ipipUp = (await attempt(() => ensureIpipDevice({ name: IPIP_DEVICE, mtu: underlayMtu - IPIP_OVERHEAD, ...address }))) !== undefined;
      this.#devices.add(IPIP_DEVICE);
    }
    let vxlanMac: string | undefined;
    if (vxlanTunnelAddr !== undefined || uses(state, 'vxlan')) {
      const stored = cluster.nodes.find((node) => node.name === nodeName)?.vxlanMac;
      const device = await attempt(() =>
        ensureVxlanDevice({
          name: VXLAN_DEVICE,
          vni: VXLAN_VNI,
          port: VXLAN_PORT,
          local: address.address,
          mtu: underlayMtu - VXLAN_OVERHEAD,
          mac: stored ?? vxlanMacOf(nodeName),
          ...(vxlanTunnelAddr ? { address: `${vxlanTunnelAddr}/32` } : {}),
        }),
      );
      vxlanMac = device?.mac;
      this.#devices.add(VXLAN_DEVICE);
    }
    const vxlanUp = vxlanMac !== undefined;
    const spec: NodeSpec = {
      bgp: { ipv4Address: formatNodeAddress(address), ...(ipipTunnelAddr && ipipUp ? { ipv4IPIPTunnelAddr: ipipTunnelAddr } : {}) },
      ...(vxlanTunnelAddr && vxlanMac ? { ipv4VXLANTunnelAddr: vxlanTunnelAddr, vxlanTunnelMACAddr: vxlanMac } : {}),
    };
    const published = cluster.nodes.find((node) => node.name === nodeName)?.spec;
    if (await publishAddresses(this.#options.datastore, store, this.#options.kube, nodeName, spec, published))
      log.info(`node "${nodeName}" published: ${JSON.stringify(spec)}`);

    const programmed = state.routes.filter((route) => (route.kind !== 'ipip' || ipipUp) && (route.kind !== 'vxlan' || vxlanUp));
    await syncRoutes(
      NETPLUG_ROUTE_PROTOCOL,
      programmed.map(({ dst, via, dev, onlink }) => ({ dst, via, dev, ...(onlink ? { onlink } : {}) })),
    );
    if (vxlanUp) {
      await syncNeighbors(VXLAN_DEVICE, state.neighbors);
      await syncFdb(VXLAN_DEVICE, state.fdb);
    }
    for (const [device, up] of [
      [IPIP_DEVICE, ipipUp],
      [VXLAN_DEVICE, vxlanUp],
    ] as const) {
      if (!up && this.#devices.delete(device)) await attempt(() => deleteLink(device));
    }
    const rules = natOutgoingRuleSet(cluster.pools);
    const nat = await attempt(() => this.#nat.sync(cluster.pools));
    if (nat?.outcome === 'written' || nat?.outcome === 'removed')
      log.info(`natOutgoing: ${nat.outcome === 'removed' ? 'no pool asks for it, chain removed' : `${rules.length} rules written`}`);
    if (nat?.legacyRemovedFrom)
      log.info(`natOutgoing: the iptables chain of the previous release and its jump from ${nat.legacyRemovedFrom.join(', ')} removed`);

    const counts = countsOf({ ...state, routes: programmed });
    const summary = `${counts.direct} direct, ${counts.ipip} IP-in-IP, ${counts.vxlan} VXLAN routes`;
    if (summary !== this.#last) log.info(`routes to other nodes: ${summary}`);
    this.#last = summary;
    const metrics = this.#options.metrics;
    if (metrics) {
      for (const kind of ['direct', 'ipip', 'vxlan'] as const) metrics.setRoutes(kind, counts[kind]);
      const masquerading = nat && nat.outcome !== 'waiting';
      metrics.setRoutes('masquerade', masquerading ? rules.filter((rule) => rule.statements?.some((s) => 'masquerade' in s)).length : 0);
    }
    if (failures.length > 0) throw new Error(failures.join('; '));
    return state;
  }

  /** The node's address: the setting or autodetection (the Kubernetes Node's InternalIP read once). */
  async #localAddress(): Promise<NodeAddress> {
    const { kube, nodeName, addressSetting, log } = this.#options;
    if ('autodetect' in addressSetting && this.#internalIps === undefined)
      this.#internalIps = kube ? await internalIpsOf(kube, nodeName) : [];
    const found = nodeAddress(addressSetting, this.#internalIps ?? []);
    if (found.address !== this.#address?.address || found.prefixLength !== this.#address.prefixLength)
      log.info(`node address ${formatNodeAddress(found)} on ${found.interface} (from ${found.source})`);
    this.#address = found;
    return found;
  }
}

/**
 * One line: the Kubernetes API's answer as its status code and message (the client's own message
 * holds the whole body and the headers, which change on every request).
 */
function messageOf(err: unknown): string {
  if (!(err instanceof k8s.ApiException)) return (err as Error).message;
  try {
    const status = JSON.parse(String(err.body)) as { message?: unknown };
    if (typeof status.message === 'string') return `the Kubernetes API answered ${err.code}: ${status.message}`;
  } catch {
    // not a Status: the code says enough
  }
  return `the Kubernetes API answered HTTP ${err.code}`;
}

async function internalIpsOf(kube: k8s.KubeConfig, name: string): Promise<string[]> {
  const list = await kube.makeApiClient(k8s.CoreV1Api).listNode({ fieldSelector: `metadata.name=${name}` });
  return (list.items[0]?.status?.addresses ?? []).filter((a) => a.type === 'InternalIP').map((a) => a.address);
}

/** The interface's MTU (sysfs of the agent's network namespace); 1500 when unreadable. */
function mtuOf(name: string): number {
  try {
    return Number(readFileSync(`/sys/class/net/${name}/mtu`, 'utf8').trim()) || 1500;
  } catch {
    return 1500;
  }
}
