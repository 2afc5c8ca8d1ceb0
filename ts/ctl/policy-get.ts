// netplugctl get KIND [NAME] and delete KIND NAME: netplug's policy resources on either datastore,
// as a table for people, or as the documents themselves (-o yaml|json) that apply -f takes back.
import { dump } from 'js-yaml';

import {
  DEFAULT_TIER,
  DEFAULT_TIER_ORDER,
  NAMESPACED_KINDS,
  policyResourceKey,
  type NetworkPolicyResource,
  type NetworkSetResource,
  type PolicyKind,
  type PolicyResource,
  type ProfileResource,
  type TierResource,
} from '../model/policy.ts';
import { KubeStore } from '../store/kubernetes/store.ts';
import type { Store } from '../store/store.ts';
import { isDefaultAllowProfile } from '../policy/default-allow.ts';
import { BUILT_IN_PROFILE, deleteTargets } from './policy-apply.ts';
import { readResources } from './policy-cluster.ts';
import { table } from './table.ts';
import { refused } from './usage.ts';

export type Output = 'table' | 'json' | 'yaml';

export interface Scope {
  /** The namespace of a namespaced kind (default `default`); undefined with --all-namespaces. */
  namespace: string | undefined;
}

const label = (kind: PolicyKind, name: string, namespace: string | undefined) =>
  `${kind} "${NAMESPACED_KINDS.has(kind) && namespace !== undefined ? `${namespace}/` : ''}${name}"`;

/** The default tier, as a document, when none is stored: it always exists. */
const DEFAULT_TIER_DOCUMENT: PolicyResource = {
  kind: 'Tier',
  apiVersion: 'projectnet.org/v3',
  metadata: { name: DEFAULT_TIER },
  spec: { order: DEFAULT_TIER_ORDER, defaultAction: 'Deny' },
};

export async function getResources(
  store: Store,
  kind: PolicyKind,
  name: string | undefined,
  scope: Scope,
  output: Output,
): Promise<string> {
  const namespace = NAMESPACED_KINDS.has(kind) ? scope.namespace : undefined;
  let resources = await readResources(store, kind, namespace);
  if (kind === 'Tier' && !resources.some((r) => r.metadata.name === DEFAULT_TIER)) resources = [DEFAULT_TIER_DOCUMENT, ...resources];
  resources.sort((a, b) => sortName(a).localeCompare(sortName(b)));
  if (name !== undefined) {
    const found = resources.find((r) => r.metadata.name === name);
    if (!found) throw refused(`${label(kind, name, namespace ?? 'default')} does not exist`);
    return render([found], output, true);
  }
  return render(resources, output, false);
}

export async function deleteResource(store: Store, kind: PolicyKind, name: string, namespace: string): Promise<string> {
  if (kind === 'Profile' && isDefaultAllowProfile(name)) throw refused(BUILT_IN_PROFILE);
  if (kind === 'Profile' && store instanceof KubeStore)
    throw refused('on the Kubernetes datastore profiles are computed from namespaces and service accounts; there is nothing to delete');
  const target = { key: policyResourceKey(kind, name, namespace), label: label(kind, name, namespace) };
  const { text, missing } = await deleteTargets(store, [target]);
  if (missing.length > 0) throw refused(`${target.label} does not exist`);
  return text;
}

const sortName = (r: PolicyResource) => `${r.metadata.namespace ?? ''}/${r.metadata.name}`;

function render(resources: PolicyResource[], output: Output, single: boolean): string {
  if (output !== 'table') {
    const value = single ? resources[0] : { apiVersion: 'v1', kind: 'List', items: resources };
    return output === 'json' ? `${JSON.stringify(value, null, 2)}\n` : dump(value, { noRefs: true, lineWidth: 140 });
  }
  if (resources.length === 0) return 'no resources found\n';
  const kind = (resources[0] as PolicyResource).kind;
  const namespaced = NAMESPACED_KINDS.has(kind);
  const lead = (r: PolicyResource) => (namespaced ? [r.metadata.namespace ?? '', r.metadata.name] : [r.metadata.name]);
  const head = namespaced ? ['NAMESPACE', 'NAME'] : ['NAME'];
  const labels = (r: PolicyResource) =>
    Object.entries(r.metadata.labels ?? {})
      .map(([k, v]) => `${k}=${v}`)
      .join(',');
  switch (kind) {
    case 'NetworkPolicy':
    case 'GlobalNetworkPolicy':
      return table(
        [...head, 'TIER', 'ORDER', 'SELECTOR', 'TYPES', 'INGRESS', 'EGRESS'],
        resources.map((r) => {
          const spec = (r as NetworkPolicyResource).spec;
          return [
            ...lead(r),
            spec.tier ?? DEFAULT_TIER,
            spec.order ?? '-',
            spec.selector ?? 'all()',
            (spec.types ?? []).join(','),
            spec.ingress?.length ?? 0,
            spec.egress?.length ?? 0,
          ];
        }),
      );
    case 'NetworkSet':
    case 'GlobalNetworkSet':
      return table(
        [...head, 'NETS', 'LABELS'],
        resources.map((r) => [...lead(r), ((r as NetworkSetResource).spec.nets ?? []).join(','), labels(r)]),
      );
    case 'Tier':
      return table(
        ['NAME', 'ORDER', 'DEFAULT ACTION'],
        resources.map((r) => {
          const spec = (r as TierResource).spec;
          return [r.metadata.name, spec.order ?? '-', spec.defaultAction ?? 'Deny'];
        }),
      );
    case 'Profile':
      return table(
        ['NAME', 'LABELS TO APPLY'],
        resources.map((r) => [
          r.metadata.name,
          Object.entries((r as ProfileResource).spec.labelsToApply ?? {})
            .map(([k, v]) => `${k}=${v}`)
            .join(','),
        ]),
      );
  }
}
