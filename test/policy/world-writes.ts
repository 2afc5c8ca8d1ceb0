// How the truth table's policies get into a cluster, as its users put them there: Kubernetes
// NetworkPolicies through the API (on etcd, netplug-kube-controllers copy them into etcd);
// netplug's own resources as custom resources through the API on the Kubernetes datastore, and on
// etcd as documents written by `netplugctl apply -f` and removed by `netplugctl delete -f`.
import { execFile } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';

import type * as k8s from '@kubernetes/client-node';
import { dump } from 'js-yaml';

import type { NetworkPolicyResource, NetworkSetResource, TierResource } from '../../ts/model/policy.ts';
import type { KubeNetworkPolicy } from '../../ts/policy/kubernetes.ts';
import { POLICY_GROUP } from '../../ts/store/kubernetes/resources.ts';
import { NETPLUGCTL } from '../helpers/ipam.ts';
import type { PolicyWorld } from './model.ts';

export type NetplugResource = NetworkPolicyResource | NetworkSetResource | TierResource;

/** netplug's resources created and deleted in one datastore (deleting one that is not there is no error). */
export interface NetplugWrites {
  create(resources: readonly NetplugResource[]): Promise<void>;
  remove(resources: readonly NetplugResource[]): Promise<void>;
}

export interface WorldWrites {
  /** The world's policies created. */
  apply(world: PolicyWorld): Promise<void>;
  /** The world's policies deleted (those a failed apply did not make too). */
  remove(world: PolicyWorld): Promise<void>;
}

const PLURALS: Record<string, string> = {
  NetworkPolicy: 'networkpolicies',
  GlobalNetworkPolicy: 'globalnetworkpolicies',
  NetworkSet: 'networksets',
  GlobalNetworkSet: 'globalnetworksets',
  Tier: 'tiers',
};

const gone = (err: unknown) => {
  if ((err as { code?: number }).code !== 404) throw err;
};

/** netplug's resources as custom resources (the Kubernetes datastore), their namespace only in metadata. */
export function netplugThroughApi(custom: k8s.CustomObjectsApi): NetplugWrites {
  const where = (resource: NetplugResource) => {
    const namespace = 'namespace' in resource.metadata ? resource.metadata.namespace : undefined;
    return { group: POLICY_GROUP, version: 'v3', plural: PLURALS[resource.kind] as string, namespace };
  };
  return {
    async create(resources) {
      await Promise.all(
        resources.map((body) => {
          const { namespace, ...at } = where(body);
          return namespace
            ? custom.createNamespacedCustomObject({ ...at, namespace, body })
            : custom.createClusterCustomObject({ ...at, body });
        }),
      );
    },
    async remove(resources) {
      await Promise.all(
        resources.map((resource) => {
          const { namespace, ...at } = where(resource);
          const name = resource.metadata.name;
          return (
            namespace ? custom.deleteNamespacedCustomObject({ ...at, namespace, name }) : custom.deleteClusterCustomObject({ ...at, name })
          ).catch(gone);
        }),
      );
    },
  };
}

const run = promisify(execFile);

/** netplug's resources as documents, with netplugctl given `flags` (the datastore); its files are written in `dir`. */
export function netplugThroughCtl(flags: readonly string[], dir: string): NetplugWrites {
  let files = 0;
  const ctl = async (command: 'apply' | 'delete', resources: readonly NetplugResource[]) => {
    if (resources.length === 0) return;
    const file = join(dir, `${command}-${files++}.yaml`);
    writeFileSync(file, resources.map((resource) => `---\n${dump(resource, { noRefs: true })}`).join(''));
    try {
      await run(NETPLUGCTL, [...flags, command, '-f', file], { env: { PATH: '/usr/bin:/bin' }, timeout: 60_000 });
    } catch (err) {
      const { stderr, stdout } = err as { stderr?: string; stdout?: string };
      throw new Error(`netplugctl ${command} -f ${file}: ${stderr}${stdout}`);
    }
  };
  return { create: (resources) => ctl('apply', resources), remove: (resources) => ctl('delete', resources) };
}

// Kubernetes NetworkPolicies go through the generic client: client-node's typed one knows an
// ingress rule's peers as `_from` and would drop `from` (opening the rule to everyone).
const knp = (policy: KubeNetworkPolicy) => ({
  group: 'networking.k8s.io',
  version: 'v1',
  namespace: policy.metadata.namespace ?? 'default',
  plural: 'networkpolicies',
});

/** A world's Kubernetes NetworkPolicies through the API, its netplug policies by `netplug`. */
export function worldWrites(custom: k8s.CustomObjectsApi, netplug: NetplugWrites): WorldWrites {
  return {
    async apply(world) {
      await Promise.all([
        ...world.kubernetesPolicies.map((policy) =>
          custom.createNamespacedCustomObject({
            ...knp(policy),
            body: { apiVersion: 'networking.k8s.io/v1', kind: 'NetworkPolicy', ...policy },
          }),
        ),
        netplug.create(world.policies),
      ]);
    },
    async remove(world) {
      await Promise.all([
        ...world.kubernetesPolicies.map((policy) =>
          custom.deleteNamespacedCustomObject({ ...knp(policy), name: policy.metadata.name }).catch(gone),
        ),
        netplug.remove(world.policies),
      ]);
    },
  };
}
