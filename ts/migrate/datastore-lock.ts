// `netplugctl datastore migrate lock|unlock`: ClusterInformation `default`'s datastoreReady, set by
// compare-and-swap. While it is false the plugin refuses ADD (CNI error 11, "try again later": the
// kubelet retries the pod's sandbox), so no address is taken while the data is copied; DEL, CHECK
// and GC go on (releasing is safe: an address freed after the export stays allocated in the copy,
// a leak `netplugctl ipam check` shows, never a duplicate), and so does STATUS (a failing STATUS
// would mark the node's network not ready, and a long migration would have pods evicted).
import { setDatastoreReady } from '../ipam/cluster-info.ts';
import type { Store } from '../store/store.ts';

export async function lockDatastore(store: Store): Promise<string> {
  const outcome = await setDatastoreReady(store, false);
  if (outcome === 'unchanged') return `${store.description} is already locked (ClusterInformation "default" datastoreReady false)\n`;
  return `${store.description} locked: ClusterInformation "default" datastoreReady false; new pods are not networked (ADD fails with code 11, the kubelet retries) until netplugctl datastore migrate unlock\n`;
}

export async function unlockDatastore(store: Store): Promise<string> {
  const outcome = await setDatastoreReady(store, true);
  if (outcome === 'missing') return `${store.description} is not locked: it has no ClusterInformation "default"\n`;
  if (outcome === 'unchanged') return `${store.description} is not locked (ClusterInformation "default" datastoreReady true)\n`;
  return `${store.description} unlocked: ClusterInformation "default" datastoreReady true; new pods are networked again\n`;
}
