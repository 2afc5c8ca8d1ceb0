// One template source for the release manifests (deploy/manifests/, written by
// scripts/generate-manifests.ts and checked for drift by a test): every object a cluster needs
// for netplug on one datastore, in the order `kubectl apply` should create them.
import { renderConfig } from './config.ts';
import { renderControllers } from './controllers.ts';
import { renderNode } from './node.ts';
import type { KubeObject, RenderOptions } from './objects.ts';
import { renderRbac } from './rbac.ts';

export function renderManifest(options: RenderOptions): KubeObject[] {
  return [...renderConfig(options), ...renderRbac(options), renderNode(options), renderControllers(options)];
}
