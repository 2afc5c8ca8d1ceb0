// The temporary policy allow-all-upgrade (the spec's manifest upgrade, step 7). Releases before
// POLICY_SINCE enforce no network policy, so a cluster upgraded from one may hold policies that
// never applied; this release's netplug-node enforces them as it starts on each node, cutting
// connections that flowed the day before. When the cluster holds such policies (or host
// endpoints), the upgrade first creates GlobalNetworkPolicy allow-all-upgrade: tier default,
// ordered before every other policy of it, every endpoint, both directions, Log then Allow.
// Traffic then flows as before the upgrade and every flow it admits is logged (netplug-node's log;
// `netplugctl flows --policy allow-all-upgrade` with flow logs on); the administrator adds the
// global policies the logs call for and deletes it (docs/upgrade.md). Written through netplug's
// datastore layer, as `netplugctl apply` writes it: a custom resource on the Kubernetes datastore,
// a document on etcd. The label says the upgrade made it, so a rollback deletes only its own.
import { applyDocuments } from '../ctl/policy-apply.ts';
import { CREATED_BY_LABEL, isAutomatic, type HostEndpoint } from '../model/host-endpoint.ts';
import { keys } from '../model/keys.ts';
import { checkPolicyDocument } from '../model/policy-check.ts';
import {
  DEFAULT_TIER,
  DEFAULT_TIER_ORDER,
  KUBERNETES_POLICY_ORDER,
  KUBERNETES_POLICY_PREFIX,
  policyResourceKey,
  type NetworkPolicyResource,
  type TierResource,
} from '../model/policy.ts';
import { openStore, type DatastoreSettings } from '../store/open.ts';
import type { Store } from '../store/store.ts';
import type { Json, UpgradeKube } from './kube.ts';
import { hasPolicyAgent } from './policy-off.ts';
import { TARGET } from './versions.ts';

export const ALLOW_ALL_UPGRADE = 'allow-all-upgrade';
/** The flag that leaves allow-all-upgrade out: the policies are enforced as soon as each node runs this release. */
export const SKIP_FLAG = '--skip-allow-all-upgrade';
const CREATED_BY = 'netplugctl-upgrade';

/** What the cluster holds that a release without a policy agent never enforced. */
export interface UnenforcedPolicies {
  /** Kubernetes NetworkPolicies, `namespace/name`. */
  kubernetes: string[];
  /** netplug's policies: `NetworkPolicy namespace/name`, `GlobalNetworkPolicy name`. */
  netplug: string[];
  /** Host endpoints not made by the controllers (those carry the allow-all profile). */
  hostEndpoints: string[];
  /** The lowest order of a policy in tier default (Kubernetes NetworkPolicies are at 1000). */
  lowestOrder?: number | undefined;
  /** Tiers ordered before default that hold policies: those are evaluated before allow-all-upgrade. */
  earlierTiers: string[];
}

export type AllowAllDecision = { create: true; why: string; order: number } | { create: false; why: string };

const count = (found: UnenforcedPolicies) => found.kubernetes.length + found.netplug.length + found.hostEndpoints.length;

function listed(found: UnenforcedPolicies): string {
  const parts = [
    found.kubernetes.length ? `${found.kubernetes.length} Kubernetes NetworkPolicy(ies)` : '',
    found.netplug.length ? `${found.netplug.length} netplug policy(ies)` : '',
    found.hostEndpoints.length ? `${found.hostEndpoints.length} host endpoint(s)` : '',
  ].filter(Boolean);
  const names = [
    ...found.kubernetes.map((name) => `NetworkPolicy ${name}`),
    ...found.netplug,
    ...found.hostEndpoints.map((name) => `HostEndpoint ${name}`),
  ];
  return `${parts.join(', ')} (${names.slice(0, 3).join(', ')}${names.length > 3 ? ', ...' : ''})`;
}

/**
 * Whether the upgrade from `from` creates allow-all-upgrade: only from a release without a policy
 * agent, into a cluster holding what it never enforced, unless the administrator skips it. Its
 * order comes before every policy of tier default (ties go by name, so strictly lower).
 */
export function decideAllowAllUpgrade(from: string | undefined, found: UnenforcedPolicies | undefined, skip: boolean): AllowAllDecision {
  if (hasPolicyAgent(from)) return { create: false, why: `${from} enforces network policy already` };
  if (!found) return { create: false, why: 'the cluster’s policies were not read' };
  const total = count(found);
  if (total === 0) return { create: false, why: `no network policy or host endpoint in the cluster: nothing ${from} left unenforced` };
  if (skip)
    return {
      create: false,
      why: `${SKIP_FLAG}: ${listed(found)} enforced as soon as each node runs ${TARGET}`,
    };
  const lowest = found.lowestOrder ?? KUBERNETES_POLICY_ORDER;
  const earlier = found.earlierTiers.length
    ? `; the policies of tier(s) ${found.earlierTiers.join(', ')}, ordered before tier default, still apply first`
    : '';
  return {
    create: true,
    order: Math.min(0, Math.floor(lowest) - 1),
    why: `${from} enforced no network policy, and ${TARGET} would enforce ${listed(found)} as each node starts it; allow-all-upgrade keeps traffic flowing as before and logs it${earlier}`,
  };
}

/** The policy: every endpoint, ingress and egress, each packet logged then allowed. */
export function allowAllUpgradePolicy(order: number): NetworkPolicyResource {
  const rules = [{ action: 'Log' as const }, { action: 'Allow' as const }];
  return {
    apiVersion: 'projectnet.org/v3',
    kind: 'GlobalNetworkPolicy',
    metadata: { name: ALLOW_ALL_UPGRADE, labels: { [CREATED_BY_LABEL]: CREATED_BY } },
    spec: { tier: DEFAULT_TIER, order, selector: 'all()', types: ['Ingress', 'Egress'], ingress: rules, egress: rules },
  };
}

/** What to do once the upgrade is done (docs/upgrade.md, step 7), for apply's and status's last lines. */
export const REVIEW_STEPS = `GlobalNetworkPolicy ${ALLOW_ALL_UPGRADE} lets every connection through as before the upgrade, logging each: review them (netplugctl flows --policy ${ALLOW_ALL_UPGRADE}, with flow logs on; or the Log lines of netplug-node's log), add the global network policies they call for (netplugctl apply -f), then delete it: netplugctl delete globalnetworkpolicy ${ALLOW_ALL_UPGRADE} (docs/upgrade.md)`;

export function allowAllUpgradeOperation(settings: DatastoreSettings): string {
  return settings.datastore_type === 'kubernetes'
    ? `POST GlobalNetworkPolicy ${ALLOW_ALL_UPGRADE} (projectnet.org/v3), unless it exists`
    : `PUT ${keys.globalNetworkPolicy(ALLOW_ALL_UPGRADE)} (etcd), unless it exists`;
}

async function withStore<T>(settings: DatastoreSettings, use: (store: Store) => Promise<T>): Promise<T> {
  const store = await openStore(settings);
  try {
    return await use(store);
  } finally {
    store.close();
  }
}

const KEY = policyResourceKey('GlobalNetworkPolicy', ALLOW_ALL_UPGRADE);
const ours = (value: unknown) => (value as Json | undefined)?.metadata?.labels?.[CREATED_BY_LABEL] === CREATED_BY;

/** Creates it (idempotent: a resumed step finds its own). One of the administrator's own of that name is left alone. */
export function createAllowAllUpgrade(settings: DatastoreSettings, policy: unknown): Promise<string> {
  const resource = checkPolicyDocument(policy);
  return withStore(settings, async (store) => {
    const existing = await store.get(KEY);
    if (existing && !ours(existing.value))
      return `GlobalNetworkPolicy ${ALLOW_ALL_UPGRADE} exists already, not made by an upgrade: left as it is`;
    const said = await applyDocuments(store, [
      { resource, key: KEY, label: `GlobalNetworkPolicy "${ALLOW_ALL_UPGRADE}"`, origin: 'netplugctl upgrade' },
    ]);
    return `${said.trim()} in ${store.description}`;
  });
}

/** Rollback: deletes it if the upgrade made it (the previous release enforces nothing; it would only linger). */
export function removeAllowAllUpgrade(settings: DatastoreSettings): Promise<string> {
  return withStore(settings, async (store) => {
    const existing = await store.get(KEY);
    if (!existing) return `GlobalNetworkPolicy ${ALLOW_ALL_UPGRADE} is gone already`;
    if (!ours(existing.value)) return `GlobalNetworkPolicy ${ALLOW_ALL_UPGRADE} was not made by the upgrade: kept`;
    await store.commit([{ key: KEY, remove: true, revision: existing.revision }]);
    return `GlobalNetworkPolicy ${ALLOW_ALL_UPGRADE} deleted`;
  });
}

/** Whether it is still there (status reminds the administrator of the step left). */
export function allowAllUpgradeExists(settings: DatastoreSettings): Promise<boolean> {
  return withStore(settings, async (store) => (await store.get(KEY)) !== undefined);
}

interface Found {
  kind: 'NetworkPolicy' | 'GlobalNetworkPolicy' | 'Tier' | 'HostEndpoint';
  metadata: { name: string; namespace?: string; labels?: Record<string, string> };
  spec?: { order?: number; tier?: string };
}

/** netplug's policies, tiers and host endpoints: custom resources (a kind the cluster does not serve holds none), or etcd documents. */
async function netplugObjects(kube: UpgradeKube, settings: DatastoreSettings): Promise<Found[]> {
  if (settings.datastore_type === 'kubernetes') {
    const lists = await Promise.all([
      kube.list('projectnet.org/v3', 'NetworkPolicy'),
      kube.list('projectnet.org/v3', 'GlobalNetworkPolicy'),
      kube.list('projectnet.org/v3', 'Tier'),
      kube.list('crd.projectnet.org/v1', 'HostEndpoint'),
    ]);
    return lists.flat() as Found[];
  }
  return withStore(settings, async (store) => {
    const found: Found[] = [];
    for (const [kind, prefix] of [
      ['NetworkPolicy', keys.networkPolicies],
      ['GlobalNetworkPolicy', keys.globalNetworkPolicies],
      ['Tier', keys.tiers],
      ['HostEndpoint', keys.hostEndpoints],
    ] as const)
      for (const entry of await store.list<Json>(prefix)) found.push({ ...entry.value, kind } as Found);
    return found;
  });
}

/** What a release without a policy agent left unenforced in this cluster. */
export async function findUnenforcedPolicies(kube: UpgradeKube, settings: DatastoreSettings): Promise<UnenforcedPolicies> {
  const kubernetes = (await kube.list('networking.k8s.io/v1', 'NetworkPolicy')).map(
    (policy) => `${policy.metadata.namespace}/${policy.metadata.name}`,
  );
  const objects = await netplugObjects(kube, settings);
  // On etcd the controllers copy Kubernetes NetworkPolicies as knp.default.<name>: counted once, above.
  // allow-all-upgrade itself (a plan made again after a rollback that kept it) is not one to enforce.
  const policies = objects.filter(
    (o) =>
      (o.kind === 'NetworkPolicy' || o.kind === 'GlobalNetworkPolicy') &&
      !o.metadata.name.startsWith(KUBERNETES_POLICY_PREFIX) &&
      !(o.kind === 'GlobalNetworkPolicy' && o.metadata.name === ALLOW_ALL_UPGRADE),
  );
  const tierOrder = new Map(
    objects.filter((o) => o.kind === 'Tier').map((t) => [t.metadata.name, (t as unknown as TierResource).spec?.order ?? Infinity]),
  );
  const tierOf = (o: Found) => o.spec?.tier ?? DEFAULT_TIER;
  const orders = policies
    .filter((o) => tierOf(o) === DEFAULT_TIER && typeof o.spec?.order === 'number')
    .map((o) => o.spec?.order as number);
  const earlierTiers = [...new Set(policies.map(tierOf))].filter(
    (tier) => tier !== DEFAULT_TIER && (tierOrder.get(tier) ?? Infinity) < DEFAULT_TIER_ORDER,
  );
  return {
    kubernetes,
    netplug: policies.map((o) => `${o.kind} ${o.metadata.namespace ? `${o.metadata.namespace}/` : ''}${o.metadata.name}`),
    hostEndpoints: objects
      .filter((o) => o.kind === 'HostEndpoint' && !isAutomatic(o as unknown as HostEndpoint))
      .map((o) => o.metadata.name),
    lowestOrder: orders.length ? Math.min(...orders, ...(kubernetes.length ? [KUBERNETES_POLICY_ORDER] : [])) : undefined,
    earlierTiers: earlierTiers.sort(),
  };
}
