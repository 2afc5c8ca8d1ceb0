// Everything netplug-operator makes in netplug-system from a defaulted, valid Installation: the
// same renderers as the release manifests (ts/render), in their operator variant, on the
// Kubernetes datastore. In the order they are applied; removed in the order cleanUp gives.
// With FlowLogAggregator "default", also netplug-flows (renderFlowsSystem), and netplug-node with
// flow logs on (`flowLogs`).
import { renderAddressAnnotationAdmission } from '../render/address-annotation-admission.ts';
import { renderControllers } from '../render/controllers.ts';
import { renderFlowViewer } from '../render/flow-viewer.ts';
import { type FlowsWindow, renderFlows } from '../render/flows.ts';
import { renderNode } from '../render/node.ts';
import { CNI_PLUGIN, type KubeObject, type NodeLayout, type RenderOptions, STANDARD_NODE_LAYOUT } from '../render/objects.ts';
import { renderPodCidrRbac } from '../render/pod-cidr-rbac.ts';
import { renderRbac } from '../render/rbac.ts';
import { CNI_CONFIG_KEY, CNI_CONFIG_MAP, type InstallationSpec, MANAGED_BY, SYSTEM_NAMESPACE } from './installation.ts';
import { configHash, endpointStatusPathPrefix, renderCniConfig } from './render-cni-config.ts';

export interface SystemObjects {
  namespace: KubeObject;
  configMap: KubeObject;
  /** ServiceAccounts and roles of netplug-node and netplug-kube-controllers. */
  rbac: KubeObject[];
  /** The CNI plugin's: removed last, once no node pod needs its credentials for a DEL. */
  cniRbac: KubeObject[];
  /** The policy and binding that restrict the address annotations (cluster-scoped, as the manifests ship them). */
  admission: KubeObject[];
  daemonSet: KubeObject;
  deployment: KubeObject;
}

const labelled = (object: KubeObject): KubeObject => ({
  ...object,
  metadata: { ...object.metadata, labels: { ...(object.metadata['labels'] as object | undefined), ...MANAGED_BY } },
});

export function renderSystem(
  spec: InstallationSpec,
  image: string,
  node: NodeLayout = STANDARD_NODE_LAYOUT,
  extra: { flowLogs?: { intervalSeconds: number } | undefined } = {},
): SystemObjects {
  const data = { [CNI_CONFIG_KEY]: renderCniConfig(spec, node) };
  const options: RenderOptions = {
    datastore: 'kubernetes',
    namespace: SYSTEM_NAMESPACE,
    image,
    operator: {
      configMap: CNI_CONFIG_MAP,
      configKey: CNI_CONFIG_KEY,
      binDir: spec.cni?.binDir ?? '/opt/cni/bin',
      confDir: spec.cni?.confDir ?? '/etc/cni/net.d',
      stateDir: node.stateDir,
      node,
      fastPath: spec.cni?.fastPath !== 'Disabled',
      policyEnforcement: spec.policy?.enforcement !== 'Disabled',
      endpointStatusPathPrefix: endpointStatusPathPrefix(spec, node),
      usePodCidr: spec.cni?.ipam?.type === 'HostLocal',
      configHash: configHash(data),
      ...(extra.flowLogs ? { flowLogs: extra.flowLogs } : {}),
    },
  };
  const rbac = [...renderRbac(options), ...renderPodCidrRbac(options, options.operator?.usePodCidr ?? false)].map(labelled);
  const isCni = (object: KubeObject) => object.metadata.name === CNI_PLUGIN;
  return {
    namespace: labelled({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: SYSTEM_NAMESPACE, labels: { name: SYSTEM_NAMESPACE } } }),
    configMap: labelled({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: CNI_CONFIG_MAP, namespace: SYSTEM_NAMESPACE }, data }),
    rbac: rbac.filter((object) => !isCni(object)),
    cniRbac: rbac.filter(isCni),
    admission: renderAddressAnnotationAdmission().map(labelled),
    daemonSet: labelled(renderNode(options)),
    deployment: labelled(renderControllers(options)),
  };
}

/** In the order they are applied: the admission policy before the node pods that honour the annotations. */
export const applyOrder = (system: SystemObjects): KubeObject[] => [
  system.namespace,
  system.configMap,
  ...system.cniRbac,
  ...system.rbac,
  ...system.admission,
  system.daemonSet,
  system.deployment,
];

/**
 * netplug-flows in netplug-system (ts/render/flows.ts), writable by netplug-node's service account
 * there: its ServiceAccount, ClusterRole and binding, Service, then Deployment, in the order they
 * are applied. The Service comes before the Deployment, whose presence turns netplug-node's flow
 * logs on: the node pods that start then are given the Service's address.
 */
export const renderFlowsSystem = (window: FlowsWindow, image: string): KubeObject[] =>
  renderFlows({ datastore: 'kubernetes', namespace: SYSTEM_NAMESPACE, image }, window).map(labelled);

/** With FlowViewer "default" (and the aggregator it reads): netplug-flow-viewer's objects, its Service before its Deployment. */
export const renderViewerSystem = (image: string): KubeObject[] => renderFlowViewer({ namespace: SYSTEM_NAMESPACE, image }).map(labelled);
