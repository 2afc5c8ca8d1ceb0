// The IP pools a defaulted, valid Installation asks for, as netplug's pool documents (the ones
// netplugctl writes, ts/model/pool-resource.ts), and as the crd.projectnet.org IPPool objects
// that hold them on the Kubernetes datastore, labelled as the operator's.
import { keys } from '../model/keys.ts';
import type { PoolResource, PoolSpec } from '../model/ip-pool.ts';
import { PoolOptionError, poolResource } from '../model/pool-resource.ts';
import { GROUP, KEY_ANNOTATION, VERSION } from '../store/kubernetes/resources.ts';
import { type Encapsulation, type InstallationPool, type InstallationSpec, InvalidConfiguration, MANAGED_BY } from './installation.ts';

const MODES: Record<Encapsulation, { 'ipip-mode': string; 'vxlan-mode': string }> = {
  IPIP: { 'ipip-mode': 'Always', 'vxlan-mode': 'Never' },
  IPIPCrossSubnet: { 'ipip-mode': 'CrossSubnet', 'vxlan-mode': 'Never' },
  VXLAN: { 'ipip-mode': 'Never', 'vxlan-mode': 'Always' },
  VXLANCrossSubnet: { 'ipip-mode': 'Never', 'vxlan-mode': 'CrossSubnet' },
  None: { 'ipip-mode': 'Never', 'vxlan-mode': 'Never' },
};

/** An IPPool object of the Kubernetes datastore, holding netplug's pool document. */
export interface PoolObject {
  metadata: { name: string; labels?: Record<string, string>; deletionTimestamp?: unknown };
  spec: PoolResource;
}

/** One listed pool as netplug's document. */
function poolDocument(pool: InstallationPool, index: number, now: Date): PoolResource {
  try {
    return poolResource(
      pool.name ?? '',
      {
        cidr: pool.cidr,
        'block-size': pool.blockSize === undefined ? undefined : String(pool.blockSize),
        'node-selector': pool.nodeSelector,
        ...MODES[pool.encapsulation ?? 'None'],
        'nat-outgoing': pool.natOutgoing === 'Enabled',
        disabled: pool.disableNewAllocations ?? false,
      },
      now,
    );
  } catch (err) {
    if (!(err instanceof PoolOptionError)) throw err;
    throw new InvalidConfiguration(`spec.calicoNetwork.ipPools[${index}]: ${err.message}`);
  }
}

export function desiredPools(spec: InstallationSpec, now: Date): PoolResource[] {
  return (spec.calicoNetwork?.ipPools ?? []).map((pool, i) => poolDocument(pool, i, now));
}

/** Whether a pool's spec is what the Installation asks (the fields it sets; adoption compares these, not whole objects). */
export function samePool(a: PoolSpec, b: PoolSpec): boolean {
  return (['cidr', 'blockSize', 'nodeSelector', 'ipipMode', 'vxlanMode', 'natOutgoing', 'disabled'] as const).every(
    (field) => a[field] === b[field],
  );
}

/** The IPPool object holding a pool document, as the Kubernetes datastore stores it, labelled as the operator's. */
export function poolObject(pool: PoolResource) {
  return {
    apiVersion: `${GROUP}/${VERSION}`,
    kind: 'IPPool',
    metadata: { name: pool.metadata.name, labels: { ...MANAGED_BY }, annotations: { [KEY_ANNOTATION]: keys.pool(pool.metadata.name) } },
    spec: pool,
  };
}
