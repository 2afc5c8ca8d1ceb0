// Makes this node's kernel hold a KernelState (kernel-state.ts): the tunnel devices, the main
// table's routes of netplug's protocol (IPv4 and IPv6; others of that protocol removed), and the
// VXLAN devices' neighbour and FDB entries (over IPv4 and over IPv6, one device each); every call
// level-triggered (ts/dataplane/routes.ts). A device that cannot be made (a kernel without the driver) fails only the routes through it: the others are
// still programmed, and the failure is told with the counts.
import { readFileSync } from 'node:fs';

import {
  deleteLink,
  ensureIpipDevice,
  ensureVxlanDevice,
  NETPLUG_ROUTE_PROTOCOL,
  syncFdb,
  syncNeighbors,
  syncRoutes,
} from '../../dataplane/routes.ts';
import { IPIP_OVERHEAD, VXLAN_OVERHEAD, VXLAN6_OVERHEAD } from '../shared/pod-mtu.ts';
import { countsOf, type RouteKind } from './desired-routes.ts';
import { IPIP_DEVICE, type KernelState, VXLAN_DEVICE, VXLAN_DEVICE6 } from './kernel-state.ts';

/** The reference's defaults (its Felix VXLANVNI and VXLANPort). */
const VXLAN_VNI = 4096;
const VXLAN_PORT = 4789;

export class KernelProgrammer {
  /**
   * Devices this agent made, removed once no longer wanted. Not those of an earlier run: a host's
   * tunl0 may serve something else, and a stale device without routes carries nothing.
   */
  readonly #devices = new Set<string>();

  /** Programs `want`; resolves to the routes programmed per kind, and what failed (the rest programmed all the same). */
  async program(want: KernelState): Promise<{ counts: Record<RouteKind, number>; failed: string | undefined }> {
    const failures: string[] = [];
    const attempt = async <T>(what: () => Promise<T>): Promise<T | undefined> => {
      try {
        return await what();
      } catch (err) {
        failures.push((err as Error).message);
        return undefined;
      }
    };
    const underlayMtu = mtuOf(want.local.interface);
    let ipipUp = false;
    if (want.ipip) {
      const address = want.ipip.address ? { address: `${want.ipip.address}/32` } : {};
      ipipUp = (await attempt(() => ensureIpipDevice({ name: IPIP_DEVICE, mtu: underlayMtu - IPIP_OVERHEAD, ...address }))) !== undefined;
      this.#devices.add(IPIP_DEVICE);
    }
    let vxlanUp = false;
    if (want.vxlan) {
      const { address, mac } = want.vxlan;
      const device = await attempt(() =>
        ensureVxlanDevice({
          name: VXLAN_DEVICE,
          vni: VXLAN_VNI,
          port: VXLAN_PORT,
          local: want.local.address.address,
          mtu: underlayMtu - VXLAN_OVERHEAD,
          mac,
          ...(address ? { address: `${address}/32` } : {}),
        }),
      );
      vxlanUp = device !== undefined;
      this.#devices.add(VXLAN_DEVICE);
    }
    // VXLAN over IPv6: the same VNI and port (the kernel keeps an IPv4 and an IPv6 device of one VNI apart).
    let vxlan6Up = false;
    if (want.vxlan6) {
      const { address, mac, local } = want.vxlan6;
      const device = await attempt(() =>
        ensureVxlanDevice({
          name: VXLAN_DEVICE6,
          vni: VXLAN_VNI,
          port: VXLAN_PORT,
          local,
          mtu: mtuOf(want.local.address6?.interface ?? want.local.interface) - VXLAN6_OVERHEAD,
          mac,
          ...(address ? { address: `${address}/128` } : {}),
        }),
      );
      vxlan6Up = device !== undefined;
      this.#devices.add(VXLAN_DEVICE6);
    }
    const down = new Set([...(ipipUp ? [] : [IPIP_DEVICE]), ...(vxlanUp ? [] : [VXLAN_DEVICE]), ...(vxlan6Up ? [] : [VXLAN_DEVICE6])]);
    const programmed = want.routes.routes.filter((route) => !down.has(route.dev));
    await syncRoutes(
      NETPLUG_ROUTE_PROTOCOL,
      programmed.map(({ dst, via, dev, onlink }) => ({ dst, via, dev, ...(onlink ? { onlink } : {}) })),
    );
    if (vxlanUp) {
      await syncNeighbors(VXLAN_DEVICE, want.routes.neighbors);
      await syncFdb(VXLAN_DEVICE, want.routes.fdb);
    }
    if (vxlan6Up) {
      await syncNeighbors(VXLAN_DEVICE6, want.routes.neighbors6);
      await syncFdb(VXLAN_DEVICE6, want.routes.fdb6);
    }
    for (const [device, up] of [
      [IPIP_DEVICE, ipipUp],
      [VXLAN_DEVICE, vxlanUp],
      [VXLAN_DEVICE6, vxlan6Up],
    ] as const) {
      if (!up && this.#devices.delete(device)) await attempt(() => deleteLink(device));
    }
    return { counts: countsOf({ ...want.routes, routes: programmed }), failed: failures.length > 0 ? failures.join('; ') : undefined };
  }
}

/** The interface's MTU (sysfs of the agent's network namespace); 1500 when unreadable. */
function mtuOf(name: string): number {
  try {
    return Number(readFileSync(`/sys/class/net/${name}/mtu`, 'utf8').trim()) || 1500;
  } catch {
    return 1500;
  }
}
