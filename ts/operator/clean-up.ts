// Deleting the Installation removes what the operator made in netplug-system, in an order that
// keeps every pod able to leave cleanly: the controllers and netplug-flows (FlowLogAggregator's,
// whose other objects its controller removes) first, and the node pods (whose install-cni then
// removes the plugin from the node) only once their pods are gone, since their own sandbox
// teardown needs the plugin; the template with them; the node pods' accounts and the CNI plugin's
// credentials only once no netplug-node pod remains (a pod being deleted still needs the plugin's
// DEL), and the admission policy of the address annotations with them (while a node pod runs, its
// plugin still honours them); the namespace last. Pools and the addresses pods hold are kept. Then
// the finalizer goes, and the API server deletes the Installation. Which pods remain is read from
// the pod cache; that none does is confirmed by a fresh list before anything they need is removed.
import type * as k8s from '@kubernetes/client-node';

import { FLOWS } from '../render/flows.ts';
import { CONTROLLERS, NODE } from '../render/objects.ts';
import type { Informer } from '../runtime/informers.ts';
import type { Log } from '../runtime/log.ts';
import { FINALIZER, type Installation, SYSTEM_NAMESPACE } from './installation.ts';
import { mergePatch, type OperatorKube, remove } from './open-kube.ts';
import { renderFlowsSystem, renderSystem } from './render-system.ts';
import { INSTALLATION_PLURAL } from './write-status.ts';

/** How many of netplug-system's pods with label k8s-app=`app` remain: the cache's count, or when it has none, the API's. */
async function remaining(kube: OperatorKube, pods: Informer<k8s.V1Pod>, app: string): Promise<number> {
  const cached = pods.list().filter((pod) => pod.metadata?.labels?.['k8s-app'] === app).length;
  if (cached > 0) return cached;
  return (await kube.core.listNamespacedPod({ namespace: SYSTEM_NAMESPACE, labelSelector: `k8s-app=${app}` })).items.length;
}

/** Undefined once everything is removed and the finalizer released; else what it waits for. */
export async function cleanUp(
  kube: OperatorKube,
  pods: Informer<k8s.V1Pod>,
  installation: Installation,
  image: string,
  log: Log,
): Promise<string | undefined> {
  // What to remove is known by kind and name: the spec's values do not matter here.
  const system = renderSystem(installation.status?.computed ?? {}, image);
  const flows = renderFlowsSystem({}, image).filter((object) => object.kind === 'Deployment');
  for (const deployment of [system.deployment, ...flows])
    if (await remove(kube, deployment)) log.info(`deleted Deployment ${SYSTEM_NAMESPACE}/${deployment.metadata.name}`);
  for (const app of [CONTROLLERS, FLOWS])
    if ((await remaining(kube, pods, app)) > 0) return `waiting for the ${app} pod to stop before removing the CNI plugin from the nodes`;
  for (const object of [system.daemonSet, system.configMap])
    if (await remove(kube, object)) log.info(`deleted ${object.kind} ${SYSTEM_NAMESPACE}/${object.metadata.name}`);
  const count = await remaining(kube, pods, NODE);
  if (count > 0) {
    return `waiting for ${count} ${NODE} pod${count === 1 ? '' : 's'} to stop before removing the CNI plugin's credentials`;
  }
  for (const object of [...system.admission, ...system.rbac, ...system.cniRbac, system.namespace])
    if (await remove(kube, object))
      log.info(`deleted ${object.kind} ${object.metadata.namespace ? `${object.metadata.namespace}/` : ''}${object.metadata.name}`);
  for (const name of ['netplug', 'ippools'])
    await remove(kube, { apiVersion: 'operator.projectnet.org/v1', kind: 'NetplugStatus', metadata: { name } });
  const finalizers = (installation.metadata.finalizers ?? []).filter((f) => f !== FINALIZER);
  await mergePatch(kube, INSTALLATION_PLURAL, installation.metadata.name, {
    metadata: { resourceVersion: installation.metadata.resourceVersion, finalizers },
  });
  log.info(`Installation "${installation.metadata.name}" cleaned up (IP pools kept); finalizer ${FINALIZER} removed`);
  return undefined;
}
