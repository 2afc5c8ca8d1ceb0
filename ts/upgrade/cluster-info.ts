// ClusterInformation `default`, and the release each node records, read through netplug's
// datastore layer: on the Kubernetes datastore through the same kubeconfig, on etcd through
// netplugctl's datastore flags (or, without them, the endpoints the install's ConfigMap names).
import { readClusterInfo, readNodeVersions, type RecordedVersion } from '../ipam/cluster-info.ts';
import type { ClusterInfoSpec } from '../model/cluster-information.ts';
import { openStore, type DatastoreSettings } from '../store/open.ts';
import type { Install } from './detect.ts';

export interface ClusterInfoRead {
  info?: ClusterInfoSpec | undefined;
  /** Why it could not be read (the datastore unreachable, ...); absent when read or simply not there. */
  problem?: string | undefined;
  where: string;
  /** With `withNodes`: the release each node records. */
  nodes?: RecordedVersion[] | undefined;
}

export function datastoreFor(
  install: Pick<Install, 'datastore' | 'etcdEndpoints'>,
  etcd: DatastoreSettings,
  kubeconfig: string | undefined,
): DatastoreSettings {
  if (install.datastore === 'kubernetes') return { datastore_type: 'kubernetes', kubernetes: kubeconfig ? { kubeconfig } : {} };
  const settings: DatastoreSettings = { ...etcd, datastore_type: 'etcdv3' };
  delete settings.kubernetes;
  if (!settings.etcd_endpoints && !settings.etcd_discovery_srv && install.etcdEndpoints) settings.etcd_endpoints = install.etcdEndpoints;
  return settings;
}

export async function readClusterInformation(settings: DatastoreSettings, withNodes = false): Promise<ClusterInfoRead> {
  let where =
    settings.datastore_type === 'kubernetes' ? 'the Kubernetes datastore' : `etcd at ${settings.etcd_endpoints ?? '(no endpoints)'}`;
  try {
    const store = await openStore(settings);
    where = store.description;
    try {
      const info = await readClusterInfo(store);
      return { info, where, ...(withNodes ? { nodes: await readNodeVersions(store) } : {}) };
    } finally {
      store.close();
    }
  } catch (err) {
    return { problem: (err as Error).message.split('\n')[0], where };
  }
}
