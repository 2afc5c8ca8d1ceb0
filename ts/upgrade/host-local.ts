// The host-local extras of a manifest install (the spec's "Host-local installs: extra steps"), done
// by `netplugctl migrate host-local`'s function: upgrade-ipam off the live DaemonSet and
// USE_POD_CIDR=true on netplug-node, in one guarded JSON patch, idempotent.
import { migrateHostLocal } from '../migrate/host-local.ts';
import type { UpgradeKube } from './kube.ts';

export async function applyHostLocalSteps(kube: UpgradeKube, namespace: string): Promise<string[]> {
  const result = await migrateHostLocal(kube.config, namespace);
  return [
    ...(result.removedUpgradeIpam ? [`init container upgrade-ipam (${result.removedUpgradeIpam.image}) removed`] : []),
    ...(result.setUsePodCidr ? ['USE_POD_CIDR=true set on netplug-node'] : []),
  ];
}
