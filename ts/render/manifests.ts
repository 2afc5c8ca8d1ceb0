// One template source for the release manifests (deploy/manifests/, written by
// scripts/generate-manifests.ts and checked for drift by a test): every object a cluster needs
// for netplug on one datastore, in the order `kubectl apply` should create them; the admission
// policy for the address annotations before the pods that honour them.
import { renderAddressAnnotationAdmission } from './address-annotation-admission.ts';
import { renderConfig } from './config.ts';
import { renderControllers } from './controllers.ts';
import { renderNode } from './node.ts';
import type { KubeObject, RenderOptions } from './objects.ts';
import { renderPodCidrRbac } from './pod-cidr-rbac.ts';
import { renderRbac } from './rbac.ts';

export function renderManifest(options: RenderOptions): KubeObject[] {
  const podCidrRbac = options.ipam === 'host-local' ? renderPodCidrRbac(options, true) : [];
  return [
    ...renderConfig(options),
    ...renderRbac(options),
    ...podCidrRbac,
    ...renderAddressAnnotationAdmission(),
    renderNode(options),
    renderControllers(options),
  ];
}
