// The workload endpoint ADD writes for the policy agent: the pod's node, interfaces, MAC and
// addresses, and in Kubernetes mode its labels, service account, named ports, profiles and
// floating IPs. Built as a companion of the allocation, so netplug-ipam commits it with the
// addresses.
import type { Companion } from '../ipam/allocator.ts';
import { parseIp } from '../net/cidr.ts';
import type { PodInfo } from '../k8s/objects.ts';
import type { PluginContext } from './context.ts';
import { endpointKey } from './workload.ts';
import { workloadEndpoint, type WorkloadEndpoint, type WorkloadEndpointSpec } from '../model/workload-endpoint.ts';

export interface EndpointFacts {
  hostIfname: string;
  /** The pod as the Kubernetes API describes it (policy.type k8s). */
  pod?: PodInfo | undefined;
  /** Addresses that reach the pod from outside, each paired with the pod's address of its family. */
  floatingIps?: string[] | undefined;
}

export function endpointCompanion(ctx: PluginContext, facts: EndpointFacts): Companion {
  const { env, conf, node, workload } = ctx;
  const { pod } = facts;
  return {
    key: endpointKey(workload),
    value: (addresses, current) => {
      const spec: WorkloadEndpointSpec = {
        orchestrator: workload.orchestrator,
        workload: workload.orchestrator === 'k8s' ? '' : env.containerId,
        node,
        containerID: env.containerId,
        pod: workload.pod ?? '',
        endpoint: env.ifname,
        interfaceName: facts.hostIfname,
        mac: macFor(addresses),
        ipNetworks: addresses.map(hostNetwork),
        // With policy read from Kubernetes, the namespace's and the service account's profiles.
        profiles: pod ? [`kns.${pod.namespace}`, `ksa.${pod.namespace}.${pod.serviceAccount}`] : [conf.name],
        ...(pod ? { serviceAccountName: pod.serviceAccount } : {}),
        ...(pod?.ports.length ? { ports: pod.ports } : {}),
        ...(facts.floatingIps?.length ? { ipNATs: natsFor(facts.floatingIps, addresses) } : {}),
      };
      const labels = {
        ...pod?.labels,
        ...(pod ? { 'projectnet.org/serviceaccount': pod.serviceAccount } : {}),
        'projectnet.org/network': conf.name,
      };
      const made = workloadEndpoint(workload.namespace, spec, labels, pod?.generateName);
      // A repeated ADD (or a new sandbox of the pod) updates the endpoint; it keeps its creation time.
      const created = (current as WorkloadEndpoint | undefined)?.metadata.creationTimestamp;
      return created ? { ...made, metadata: { ...made.metadata, creationTimestamp: created } } : made;
    },
  };
}

export const hostNetwork = (address: string) => `${address}/${address.includes(':') ? 128 : 32}`;

/** Each floating IP with the pod's address of its family; a family the pod lacks is skipped. */
function natsFor(floating: readonly string[], addresses: readonly string[]) {
  return floating.flatMap((externalIP) => {
    const internalIP = addresses.find((a) => a.includes(':') === externalIP.includes(':'));
    return internalIP ? [{ internalIP, externalIP }] : [];
  });
}

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
