// HostEndpoint and KubeControllersConfiguration documents as netplug-kube-controllers and
// `netplugctl migrate auto-host-endpoints` read and write them on either datastore: Store keys
// under /netplug/resources/v3/projectnet.org/, which the Kubernetes datastore keeps as native
// custom resources. What they hold and how one read back is checked is in ts/model/.
import { randomUUID } from 'node:crypto';

import { API_VERSION } from '../model/entry.ts';
import { checkedHostEndpoint, HOST_ENDPOINTS, type HostEndpoint } from '../model/host-endpoint.ts';
import { CONFIGURATION_KEY, checkedConfiguration, type ControllersConfiguration } from '../model/kube-controllers-configuration.ts';
import { objectName } from '../store/kubernetes/resources.ts';
import type { Entry, Store } from '../store/store.ts';

/** `<node>-auto-hep`; a name too long for the API is hashed as the Kubernetes datastore hashes keys. */
export const autoHostEndpointName = (node: string): string => objectName(`${node}-auto-hep`);

export async function listHostEndpoints(store: Store): Promise<Entry<HostEndpoint>[]> {
  return (await store.list(HOST_ENDPOINTS)).map(checkedHostEndpoint);
}

export async function readConfiguration(store: Store): Promise<Entry<ControllersConfiguration> | undefined> {
  const entry = await store.get(CONFIGURATION_KEY);
  return entry && checkedConfiguration(entry);
}

/** A new document of `kind`, with the identity the Kubernetes API would give it (used as is on etcd). */
export function newDocument<K extends string, S>(kind: K, name: string, objectLabels: Record<string, string> | undefined, spec: S) {
  return {
    kind,
    apiVersion: API_VERSION,
    metadata: { name, uid: randomUUID(), creationTimestamp: new Date().toISOString(), ...(objectLabels ? { labels: objectLabels } : {}) },
    spec,
  };
}
