// Floating IPs (the pod annotation cni.projectnet.org/floatingIPs): on the pod's node, traffic to
// a floating IP is forwarded to the pod's address (DNAT), as the reference's node agent does; the
// other nodes route the floating IP here like a pod address (ts/node/routes/). Connection tracking
// turns the replies' source back into the floating IP. The rules are in the nat part of netplug's
// table: a nat chain at prerouting (traffic arriving: from other nodes, from this node's pods) and
// one at output (from this node itself), both at priority dstnat + 10. A pod reaching its own
// floating IP would get its packet back from its own address, which its kernel drops: as the
// reference does, that connection's source becomes the floating IP (a chain at postrouting,
// priority srcnat, before natOutgoing's). No floating IP, no chains.
import type { FloatingIp, RoutedWorkload } from '../shared/workloads.ts';
import { baseChain, match, PRIORITY, rule } from '../../nft/build.ts';
import type { Chain } from '../../nft/model.ts';

const CHAINS = { prerouting: 'floating-ips', output: 'floating-ips-output', hairpin: 'floating-ips-hairpin' } as const;

/**
 * The floating IPs of the pods on `node`, each with the address it forwards to, sorted. A
 * floating IP two pods claim goes to the first by name (and is noted: one address reaches one pod).
 */
export function floatingIpsOn(node: string, workloads: readonly RoutedWorkload[]): { floating: FloatingIp[]; notes: string[] } {
  const chosen = new Map<string, { ip: FloatingIp; pod: string }>();
  const notes: string[] = [];
  const here = workloads.filter((workload) => workload.node === node).sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  for (const workload of here)
    for (const ip of workload.floatingIps) {
      const taken = chosen.get(ip.externalIP);
      if (taken) notes.push(`floating IP ${ip.externalIP} is claimed by ${taken.pod} and ${workload.name}: it reaches ${taken.pod}`);
      else chosen.set(ip.externalIP, { ip, pod: workload.name });
    }
  const floating = [...chosen.values()].map(({ ip }) => ip).sort((a, b) => (a.externalIP < b.externalIP ? -1 : 1));
  return { floating, notes };
}

/** The chains that forward each floating IP to its pod; none when there is none. */
export function floatingIpChains(floating: readonly FloatingIp[]): Chain[] {
  if (floating.length === 0) return [];
  const rules = floating.map(({ externalIP, internalIP }) =>
    rule([match(externalIP.includes(':') ? 'ip6 daddr' : 'ip daddr', externalIP)], undefined, `floating IP of ${internalIP}`, [
      { dnat: { to: internalIP } },
    ]),
  );
  // One rule per pod address: any of its floating IPs answers for it.
  const hairpin = new Map<string, string>();
  for (const { externalIP, internalIP } of floating) if (!hairpin.has(internalIP)) hairpin.set(internalIP, externalIP);
  const hairpinRules = [...hairpin].map(([internalIP, externalIP]) => {
    const [saddr, daddr] = internalIP.includes(':') ? (['ip6 saddr', 'ip6 daddr'] as const) : (['ip saddr', 'ip daddr'] as const);
    return rule([match(saddr, internalIP), match(daddr, internalIP)], undefined, `to its own floating IP`, [{ snat: { to: externalIP } }]);
  });
  return [
    baseChain(CHAINS.prerouting, { type: 'nat', hook: 'prerouting', priority: PRIORITY.dstnat + 10 }, rules),
    baseChain(CHAINS.output, { type: 'nat', hook: 'output', priority: PRIORITY.dstnat + 10 }, rules),
    baseChain(CHAINS.hairpin, { type: 'nat', hook: 'postrouting', priority: PRIORITY.srcnat }, hairpinRules),
  ];
}
