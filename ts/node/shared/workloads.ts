// Where each pod of the cluster runs and the addresses that reach it, as routes and NAT need them:
// its node, its addresses and its floating IPs (each paired with the pod's address of its family).
// On etcd they are read from the workload endpoints each ADD writes; on the Kubernetes datastore
// from the pods themselves (node, status.podIPs, the floatingIPs annotation), as the reference
// derives its workload endpoints from pods there. A document that cannot be read is an error
// naming it and the field; the caller skips it and says so.
import { ANNOTATIONS } from '../../model/pod-annotations.ts';
import { parseIp, parsePrefix } from '../../net/cidr.ts';
import type { Entry } from '../../store/store.ts';

export interface FloatingIp {
  /** The pod's address traffic to `externalIP` is forwarded to. */
  internalIP: string;
  externalIP: string;
}

export interface RoutedWorkload {
  /** `<namespace>/<pod>`, for log lines. */
  name: string;
  node: string;
  /** Its addresses, without prefix length. */
  addresses: string[];
  floatingIps: FloatingIp[];
}

/** What of a pod this reads (the node agent's shared pod cache keeps these fields). */
export interface PodFields {
  kind?: string;
  metadata?: { name?: string; namespace?: string; annotations?: Record<string, string> };
  spec?: { nodeName?: string; hostNetwork?: boolean };
  status?: { phase?: string; podIPs?: { ip: string }[] | null; podIP?: string };
}

type Json = Record<string, unknown>;
const isObject = (value: unknown): value is Json => typeof value === 'object' && value !== null && !Array.isArray(value);

/**
 * The workload an entry under the workload endpoints' prefix describes: a workload endpoint
 * document, or on the Kubernetes datastore's feed a pod. Undefined for one that has no address
 * on a node yet (a pod not scheduled or not started, a finished one, a host-network pod).
 */
export function workloadOf(entry: Entry<unknown>): RoutedWorkload | undefined {
  const { key, value } = entry;
  if (!isObject(value)) throw new Error(`${key}: not an object`);
  return value['kind'] === 'Pod' ? workloadOfPod(value as PodFields) : workloadOfEndpoint(key, value);
}

function workloadOfEndpoint(key: string, value: Json): RoutedWorkload | undefined {
  const fail = (field: string, wanted: string, given: unknown) =>
    new Error(`workload endpoint ${key}: ${field} must be ${wanted}, not ${JSON.stringify(given)}`);
  const spec = value['spec'];
  if (!isObject(spec)) throw fail('spec', 'an object', spec);
  const metadata = isObject(value['metadata']) ? value['metadata'] : {};
  const { node, ipNetworks, ipNATs } = spec;
  if (typeof node !== 'string' || node === '') throw fail('spec.node', 'a node name', node);
  if (!Array.isArray(ipNetworks) || ipNetworks.some((network) => typeof network !== 'string' || !parsePrefix(network)))
    throw fail('spec.ipNetworks', 'a list of CIDRs', ipNetworks);
  const nats = ipNATs ?? [];
  const isNat = (nat: unknown) =>
    isObject(nat) &&
    typeof nat['internalIP'] === 'string' &&
    typeof nat['externalIP'] === 'string' &&
    parseIp(nat['internalIP']) !== undefined &&
    parseIp(nat['externalIP']) !== undefined;
  if (!Array.isArray(nats) || !nats.every(isNat)) throw fail('spec.ipNATs', 'a list of {internalIP, externalIP} addresses', ipNATs);
  const pod = typeof spec['pod'] === 'string' && spec['pod'] ? spec['pod'] : String(metadata['name'] ?? key);
  return {
    name: `${String(metadata['namespace'] ?? '')}/${pod}`,
    node,
    addresses: (ipNetworks as string[]).map((network) => network.slice(0, network.indexOf('/'))),
    floatingIps: (nats as FloatingIp[]).map(({ internalIP, externalIP }) => ({ internalIP, externalIP })),
  };
}

function workloadOfPod(pod: PodFields): RoutedWorkload | undefined {
  const node = pod.spec?.nodeName;
  const phase = pod.status?.phase;
  if (!node || pod.spec?.hostNetwork || phase === 'Succeeded' || phase === 'Failed') return undefined;
  const addresses = (pod.status?.podIPs ?? []).map((entry) => entry.ip).filter((ip) => parseIp(ip) !== undefined);
  if (addresses.length === 0 && pod.status?.podIP && parseIp(pod.status.podIP)) addresses.push(pod.status.podIP);
  if (addresses.length === 0) return undefined;
  const name = `${pod.metadata?.namespace ?? ''}/${pod.metadata?.name ?? ''}`;
  return { name, node, addresses, floatingIps: floatingOfPod(name, pod.metadata?.annotations?.[ANNOTATIONS.floatingIPs], addresses) };
}

/** The floatingIPs annotation's addresses, each with the pod's address of its family (a family the pod lacks: skipped, as on the endpoint). */
function floatingOfPod(name: string, annotation: string | undefined, addresses: readonly string[]): FloatingIp[] {
  if (annotation === undefined) return [];
  const fail = (problem: string) =>
    new Error(`pod ${name}: annotation "${ANNOTATIONS.floatingIPs}" ${JSON.stringify(annotation)} ${problem}`);
  let list: unknown;
  try {
    list = JSON.parse(annotation);
  } catch {
    throw fail('is not JSON: write a JSON array of IP addresses');
  }
  if (!Array.isArray(list) || list.some((ip) => typeof ip !== 'string' || parseIp(ip) === undefined))
    throw fail('must be a JSON array of IP addresses');
  return (list as string[]).flatMap((externalIP) => {
    const family = parseIp(externalIP)?.family;
    const internalIP = addresses.find((address) => parseIp(address)?.family === family);
    return internalIP ? [{ internalIP, externalIP }] : [];
  });
}
