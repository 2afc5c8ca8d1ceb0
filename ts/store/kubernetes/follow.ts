// Store.follow for the Kubernetes datastore in the resident programs: the program's shared
// informer (runtime/informers.ts: list, then watch) on the resource a prefix maps to, its objects
// turned into the entries the store's reads give (entryOfObject). The plugin's own store
// (store.ts) has no watch: its lean client loads none of client-node.
import * as k8s from '@kubernetes/client-node';

import type { Informers } from '../../runtime/informers.ts';
import type { FollowEvents, Following } from '../store.ts';
import { kindsOfPrefix, NODES_PREFIX } from './resources.ts';
import { entryOfObject, type KubeObject } from './documents.ts';

/** Follows prefixes through `informers` (started by their owner); `stop` removes the follower, the informer stays the program's. */
export function followKubernetes(config: k8s.KubeConfig, informers: Informers): (prefix: string, events: FollowEvents) => Following {
  const core = config.makeApiClient(k8s.CoreV1Api);
  const custom = config.makeApiClient(k8s.CustomObjectsApi);
  return (prefix, events) => {
    const entry = (object: k8s.KubernetesObject) => entryOfObject(prefix, object as KubeObject);
    const watched = resourceOf(prefix, core, custom);
    const objects = informers.informer<k8s.KubernetesObject>({
      what: watched.what,
      path: watched.path,
      list: watched.list,
      ...(watched.labelSelector ? { labelSelector: watched.labelSelector } : {}),
    });
    const changed = (object: k8s.KubernetesObject) => {
      const found = entry(object);
      if (found) events.changed(found);
    };
    const remove = objects.addHandler({
      synced: () => events.listed(objects.list().flatMap((object) => entry(object) ?? [])),
      add: changed,
      update: changed,
      delete: (object) => {
        const found = entry(object);
        if (found) events.removed(found.key);
      },
      failed: (err) => events.failed(err),
    });
    return { stop: remove };
  };
}

/** The collection a prefix maps to: the cluster's Nodes, or one custom resource (narrowed by label where the prefix allows). */
function resourceOf(prefix: string, core: k8s.CoreV1Api, custom: k8s.CustomObjectsApi) {
  if (prefix === NODES_PREFIX) return { what: 'nodes', path: '/api/v1/nodes', list: () => core.listNode(), labelSelector: undefined };
  const kinds = kindsOfPrefix(prefix);
  const found = kinds[0];
  if (kinds.length !== 1 || !found) throw new Error(`datastore prefix ${prefix} is not one Kubernetes resource`);
  const { kind, restPrefix } = found;
  const labelSelector = kind.selector(restPrefix);
  // A namespaced kind is followed in every namespace (the cluster-wide collection lists them all).
  return {
    what: `${kind.plural}.${kind.group}`,
    path: `/apis/${kind.group}/${kind.version}/${kind.plural}`,
    list: () =>
      custom.listClusterCustomObject({
        group: kind.group,
        version: kind.version,
        plural: kind.plural,
        ...(labelSelector ? { labelSelector } : {}),
      }) as Promise<k8s.KubernetesListObject<k8s.KubernetesObject>>,
    labelSelector,
  };
}
