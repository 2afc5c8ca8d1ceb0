// The node's addresses where other nodes read them: on the etcd datastore its Node resource's
// spec (created if the node is not registered yet; its labels are register-node.ts's), on the
// Kubernetes datastore annotations on its Kubernetes Node (the store maps them to the same spec).
import * as k8s from '@kubernetes/client-node';

import { keys } from '../../model/keys.ts';
import type { NodeResource, NodeSpec } from '../../model/node.ts';
import { checkedNodeSpec } from '../../model/checked-documents.ts';
import { nodeAddressAnnotations } from '../../store/kubernetes/documents.ts';
import { API_VERSION, retryOnConflict, type Store } from '../../store/store.ts';

export type Datastore = 'etcdv3' | 'kubernetes';

/** Writes `spec` as the node's addresses unless they are so already; says whether it wrote. */
export async function publishAddresses(
  datastore: Datastore,
  store: Store,
  kube: k8s.KubeConfig | undefined,
  name: string,
  spec: NodeSpec,
  /** What the node's document held when last read: when it matches, nothing is read or written. */
  published?: NodeSpec,
): Promise<boolean> {
  if (published && sameSpec(published, spec)) return false;
  if (datastore === 'kubernetes') {
    if (!kube) throw new Error('the Kubernetes datastore needs the Kubernetes API to publish the node addresses');
    return annotateNode(store, kube, name, spec);
  }
  return retryOnConflict(`publishing the addresses of node "${name}"`, async () => {
    const entry = await store.get(keys.node(name));
    if (!entry) {
      const node: NodeResource = {
        kind: 'Node',
        apiVersion: API_VERSION,
        metadata: { name, creationTimestamp: new Date().toISOString(), labels: {} },
        spec,
      };
      return (await store.commit([{ key: keys.node(name), create: node }])) ? true : undefined;
    }
    if (sameSpec(safeSpec(entry), spec)) return false;
    const value = entry.value as Partial<NodeResource>;
    return (await store.commit([{ key: entry.key, update: { ...value, spec: withAddresses(value.spec, spec) }, revision: entry.revision }]))
      ? true
      : undefined;
  });
}

async function annotateNode(store: Store, kube: k8s.KubeConfig, name: string, spec: NodeSpec): Promise<boolean> {
  const entry = await store.get(keys.node(name));
  if (!entry) throw new Error(`the Kubernetes Node "${name}" does not exist (yet)`);
  if (sameSpec(safeSpec(entry), spec)) return false;
  // A merge patch: null removes an annotation no longer wanted.
  const annotations = nodeAddressAnnotations(spec);
  const core = kube.makeApiClient(k8s.CoreV1Api);
  await core.patchNode({ name, body: { metadata: { annotations } } }, k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch));
  return true;
}

/** `stored` with netplug's address fields exactly those of `spec`; other fields (written by other tools) kept. */
function withAddresses(stored: unknown, spec: NodeSpec): NodeSpec {
  const {
    bgp,
    ipv4VXLANTunnelAddr: _v,
    vxlanTunnelMACAddr: _m,
    ipv6VXLANTunnelAddr: _v6,
    vxlanTunnelMACAddrV6: _m6,
    ...others
  } = (typeof stored === 'object' && stored ? stored : {}) as Record<string, unknown>;
  const {
    ipv4Address: _a,
    ipv6Address: _6,
    ipv4IPIPTunnelAddr: _i,
    ...otherBgp
  } = (typeof bgp === 'object' && bgp ? bgp : {}) as Record<string, unknown>;
  const mergedBgp = { ...otherBgp, ...spec.bgp };
  return {
    ...others,
    ...(Object.keys(mergedBgp).length > 0 ? { bgp: mergedBgp } : {}),
    ...(spec.ipv4VXLANTunnelAddr ? { ipv4VXLANTunnelAddr: spec.ipv4VXLANTunnelAddr } : {}),
    ...(spec.vxlanTunnelMACAddr ? { vxlanTunnelMACAddr: spec.vxlanTunnelMACAddr } : {}),
    ...(spec.ipv6VXLANTunnelAddr ? { ipv6VXLANTunnelAddr: spec.ipv6VXLANTunnelAddr } : {}),
    ...(spec.vxlanTunnelMACAddrV6 ? { vxlanTunnelMACAddrV6: spec.vxlanTunnelMACAddrV6 } : {}),
  };
}

/** A broken spec counts as different: it is then written over. */
function safeSpec(entry: Parameters<typeof checkedNodeSpec>[0]): NodeSpec | undefined {
  try {
    return checkedNodeSpec(entry);
  } catch {
    return undefined;
  }
}

/** Whether `a` holds the addresses of `b` (the fields netplug publishes; the others are other tools'). */
export function sameSpec(a: NodeSpec | undefined, b: NodeSpec): boolean {
  if (!a) return false;
  return (
    a.bgp?.ipv4Address === b.bgp?.ipv4Address &&
    a.bgp?.ipv6Address === b.bgp?.ipv6Address &&
    a.bgp?.ipv4IPIPTunnelAddr === b.bgp?.ipv4IPIPTunnelAddr &&
    a.ipv4VXLANTunnelAddr === b.ipv4VXLANTunnelAddr &&
    a.vxlanTunnelMACAddr === b.vxlanTunnelMACAddr &&
    a.ipv6VXLANTunnelAddr === b.ipv6VXLANTunnelAddr &&
    a.vxlanTunnelMACAddrV6 === b.vxlanTunnelMACAddrV6
  );
}
