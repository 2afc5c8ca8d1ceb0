// The release this agent runs, recorded on its own node, where ClusterInformation's version is
// computed from (the lowest any node records: ts/ipam/cluster-info.ts) and netplugctl version
// and upgrade status read it: on the etcd datastore its Node resource's status.netplugVersion (the
// resource created if the node is not registered yet; its labels are register-node.ts's), on the
// Kubernetes datastore an annotation on its Kubernetes Node, as its addresses are
// (ts/node/addresses/publish-addresses.ts; the store maps it to the same field).
import * as k8s from '@kubernetes/client-node';

import { keys } from '../../model/keys.ts';
import type { NodeResource } from '../../model/node.ts';
import { recordedVersionOf } from '../../model/release-versions.ts';
import { NODE_VERSION_ANNOTATION } from '../../store/kubernetes/resources.ts';
import { API_VERSION, retryOnConflict, type Store } from '../../store/store.ts';

/**
 * Records `version` as the node's unless it is so already; says what it did. `missing`: on the
 * Kubernetes datastore the Node does not exist (yet), and nothing could be recorded.
 */
export async function recordVersion(
  datastore: 'etcdv3' | 'kubernetes',
  store: Store,
  kube: k8s.KubeConfig | undefined,
  name: string,
  version: string,
): Promise<'recorded' | 'unchanged' | 'missing'> {
  if (datastore === 'kubernetes') {
    if (!kube) throw new Error("the Kubernetes datastore needs the Kubernetes API to record the node's release");
    const entry = await store.get(keys.node(name));
    if (!entry) return 'missing';
    if (recordedVersionOf(entry.value) === version) return 'unchanged';
    const core = kube.makeApiClient(k8s.CoreV1Api);
    const body = { metadata: { annotations: { [NODE_VERSION_ANNOTATION]: version } } };
    await core.patchNode({ name, body }, k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch));
    return 'recorded';
  }
  return retryOnConflict(`recording the version of node "${name}"`, async () => {
    const entry = await store.get(keys.node(name));
    if (!entry) {
      const node: NodeResource = {
        kind: 'Node',
        apiVersion: API_VERSION,
        metadata: { name, creationTimestamp: new Date().toISOString(), labels: {} },
        spec: {},
        status: { netplugVersion: version },
      };
      return (await store.commit([{ key: keys.node(name), create: node }])) ? 'recorded' : undefined;
    }
    if (recordedVersionOf(entry.value) === version) return 'unchanged';
    const value = entry.value as Record<string, unknown>;
    const status = typeof value['status'] === 'object' && value['status'] !== null ? value['status'] : {};
    const updated = { ...value, status: { ...status, netplugVersion: version } };
    return (await store.commit([{ key: entry.key, update: updated, revision: entry.revision }])) ? 'recorded' : undefined;
  });
}
