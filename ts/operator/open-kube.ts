// How netplug-operator reaches the Kubernetes API: through @kubernetes/client-node for its
// objects (server-side apply as `netplug-operator`, merge patches, the caches' lists and watches,
// and the fresh reads that confirm an absence before it acts on one), and through netplug's
// datastore layer (ts/store) for IPAM state when it drains a pool. KUBECONFIG names a kubeconfig
// (tests, or outside a pod); else the pod's service account, as client-go's in-cluster config.
import * as k8s from '@kubernetes/client-node';

import { inClusterClient } from '../k8s/in-cluster.ts';
import type { KubeObject } from '../render/objects.ts';
import { KubeStore } from '../store/kubernetes/store.ts';
import { openStore } from '../store/open.ts';
import type { Store } from '../store/store.ts';
import { apiStatus } from '../runtime/errors.ts';
import { FIELD_MANAGER, GROUP, VERSION } from './installation.ts';

export interface OperatorKube {
  config: k8s.KubeConfig;
  objects: k8s.KubernetesObjectApi;
  core: k8s.CoreV1Api;
  apps: k8s.AppsV1Api;
  custom: k8s.CustomObjectsApi;
  store: Store;
}

export async function openOperatorKube(env: NodeJS.ProcessEnv): Promise<OperatorKube> {
  const config = new k8s.KubeConfig();
  if (env.KUBECONFIG) config.loadFromFile(env.KUBECONFIG);
  else config.loadFromCluster();
  const store = env.KUBECONFIG
    ? await openStore({ datastore_type: 'kubernetes', kubernetes: { kubeconfig: env.KUBECONFIG } })
    : new KubeStore(inClusterClient(env, 'netplug-operator'));
  return {
    config,
    objects: k8s.KubernetesObjectApi.makeApiClient(config),
    core: config.makeApiClient(k8s.CoreV1Api),
    apps: config.makeApiClient(k8s.AppsV1Api),
    custom: config.makeApiClient(k8s.CustomObjectsApi),
    store,
  };
}

/** Server-side apply as netplug-operator, taking over fields others set (force). */
export function apply(kube: OperatorKube, object: KubeObject): Promise<k8s.KubernetesObject> {
  return kube.objects.patch(object as k8s.KubernetesObject, undefined, undefined, FIELD_MANAGER, true, k8s.PatchStrategy.ServerSideApply);
}

/** What the server answered to each apply, by `Kind/name`. */
export type Applied = Map<string, k8s.KubernetesObject>;

/** Applies `objects` in order; resolves to the server's answers (see `newest`). */
export async function applyAll(kube: OperatorKube, objects: readonly KubeObject[]): Promise<Applied> {
  const applied: Applied = new Map();
  for (const object of objects) applied.set(`${object.kind}/${object.metadata.name}`, await apply(kube, object));
  return applied;
}

/** Deletes an object; false if it was not there. */
export async function remove(kube: OperatorKube, object: KubeObject): Promise<boolean> {
  try {
    await kube.objects.delete(object as k8s.KubernetesObject);
    return true;
  } catch (err) {
    if (apiStatus(err) === 404) return false;
    throw err;
  }
}

/** The object, or undefined when the API says 404. */
export async function readOrNothing<T>(read: () => Promise<T>): Promise<T | undefined> {
  try {
    return await read();
  } catch (err) {
    if (apiStatus(err) === 404) return undefined;
    throw err;
  }
}

/** One of the operator's cluster-scoped resources (installations, netplugstatuses). */
const operatorResource = (plural: string, name: string) => ({ group: GROUP, version: VERSION, plural, name });

/** A JSON merge patch (RFC 7386) of a cluster-scoped custom object, or of its status. */
export function mergePatch(kube: OperatorKube, plural: string, name: string, body: object, status = false): Promise<object> {
  const request = { ...operatorResource(plural, name), body };
  const options = k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch);
  return status ? kube.custom.patchClusterCustomObjectStatus(request, options) : kube.custom.patchClusterCustomObject(request, options);
}

/** Server-side apply of a cluster-scoped custom object's status. */
export function applyStatus(kube: OperatorKube, plural: string, name: string, body: object): Promise<object> {
  return kube.custom.patchClusterCustomObjectStatus(
    { ...operatorResource(plural, name), body, fieldManager: FIELD_MANAGER, force: true },
    k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.ServerSideApply),
  );
}
