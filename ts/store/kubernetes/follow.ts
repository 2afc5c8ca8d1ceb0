// Store.follow for the Kubernetes datastore in the resident programs: an informer of
// @kubernetes/client-node (list, then watch; k8s/watch-objects.ts) on the resource a prefix maps
// to, its objects turned into the entries the store's reads give (entryOfObject). The plugin's own
// store (store.ts) has no watch: its lean client loads none of client-node.
import * as k8s from '@kubernetes/client-node';

import { watchObjects, type WatchedObjects, type WatchLog } from '../../k8s/watch-objects.ts';
import type { FollowEvents, Following } from '../store.ts';
import { GROUP, kindsOfPrefix, NODES_PREFIX, VERSION } from './resources.ts';
import { entryOfObject, type KubeObject } from './documents.ts';

export function followKubernetes(config: k8s.KubeConfig, log: WatchLog): (prefix: string, events: FollowEvents) => Following {
  const core = config.makeApiClient(k8s.CoreV1Api);
  const custom = config.makeApiClient(k8s.CustomObjectsApi);
  return (prefix, events) => {
    const entry = (object: k8s.KubernetesObject) => entryOfObject(prefix, object as KubeObject);
    const watched = resourceOf(prefix, core, custom);
    const objects: WatchedObjects<k8s.KubernetesObject> = watchObjects(
      config,
      watched.what,
      watched.path,
      watched.list,
      {
        synced: (): void => events.listed(objects.list().flatMap((object) => entry(object) ?? [])),
        event: (verb, object) => {
          const found = entry(object);
          if (found && verb === 'delete') events.removed(found.key);
          else if (found) events.changed(found);
        },
        failed: (err) => events.failed(err),
      },
      log,
      watched.labelSelector,
    );
    return { stop: () => void objects.stop() };
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
  return {
    what: `${kind.plural}.${GROUP}`,
    path: `/apis/${GROUP}/${VERSION}/${kind.plural}`,
    list: () =>
      custom.listClusterCustomObject({
        group: GROUP,
        version: VERSION,
        plural: kind.plural,
        ...(labelSelector ? { labelSelector } : {}),
      }) as Promise<k8s.KubernetesListObject<k8s.KubernetesObject>>,
    labelSelector,
  };
}
