// The built-in profile `projectnet-default-allow` (Calico's `projectcalico-default-allow`): no labels,
// one Allow rule each way, so it allows everything. Automatic host endpoints carry it
// (ts/controllers/auto-host-endpoints.ts). It exists on both datastores: on the Kubernetes datastore
// netplugctl computes it with the namespaces' and service accounts' profiles (ts/ctl/policy-cluster.ts),
// on etcd netplug-kube-controllers' profile controller keeps it stored. Nobody changes or deletes
// it (netplugctl refuses); netplug-node takes it from here, not from the datastore.
import { API_VERSION } from '../model/entry.ts';
import { DEFAULT_ALLOW_PROFILE } from '../model/host-endpoint.ts';
import type { ProfileResource } from '../model/policy.ts';

/** The profile, a fresh copy on each call (callers may change theirs). */
export function defaultAllowProfile(): ProfileResource {
  return {
    kind: 'Profile',
    apiVersion: API_VERSION,
    metadata: { name: DEFAULT_ALLOW_PROFILE },
    spec: { ingress: [{ action: 'Allow' }], egress: [{ action: 'Allow' }] },
  };
}

/** Whether a profile of this name is the built-in one. */
export const isDefaultAllowProfile = (name: string): boolean => name === DEFAULT_ALLOW_PROFILE;
