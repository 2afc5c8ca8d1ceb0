// netplugctl apply -f and delete: every document of the files checked first, then written in one
// commit (one etcd transaction; on the Kubernetes datastore one write after another, the earlier
// ones undone when a later one fails), re-read and retried when another writer got there first.
// A policy naming a tier that exists neither in the datastore nor in the files is refused, and so
// is deleting a tier that policies are still in, and applying or deleting the built-in profile
// projectnet-default-allow (on either datastore).
import { keys } from '../model/keys.ts';
import { DEFAULT_ALLOW_PROFILE } from '../model/host-endpoint.ts';
import { DEFAULT_TIER, policyKindPrefix, type NetworkPolicyResource, type PolicyResource } from '../model/policy.ts';
import { isDefaultAllowProfile } from '../policy/default-allow.ts';
import { KubeStore } from '../store/kubernetes/store.ts';
import { retryOnConflict, type Entry, type Store, type Write } from '../store/store.ts';
import { storedDocument, type FileDocument } from './policy-documents.ts';
import { refused } from './usage.ts';

export interface Target {
  key: string;
  label: string;
}

/** A document's content as text, keys sorted (the API server keeps its own order), server fields left out. */
const comparable = (document: unknown): string => {
  const { metadata, ...rest } = (document ?? {}) as { metadata?: Record<string, unknown> };
  const { name, namespace, labels, annotations } = metadata ?? {};
  const sorted = (value: unknown): unknown =>
    Array.isArray(value)
      ? value.map(sorted)
      : value && typeof value === 'object'
        ? Object.fromEntries(
            Object.entries(value)
              .filter(([, v]) => v !== undefined)
              .sort(([a], [b]) => (a < b ? -1 : 1))
              .map(([k, v]) => [k, sorted(v)]),
          )
        : value;
  return JSON.stringify(sorted({ ...rest, metadata: { name, namespace, labels: labels ?? {}, annotations: annotations ?? {} } }));
};

/** What apply and delete say of the built-in profile. */
export const BUILT_IN_PROFILE = `Profile ${DEFAULT_ALLOW_PROFILE} is built in: it cannot be changed or deleted`;

/** Writes the documents; says per document whether it was created, changed or already so. */
export async function applyDocuments(store: Store, documents: readonly FileDocument[]): Promise<string> {
  const builtIn = documents.find((d) => d.resource.kind === 'Profile' && isDefaultAllowProfile(d.resource.metadata.name));
  if (builtIn) throw refused(`${builtIn.origin}: ${BUILT_IN_PROFILE}`);
  const kubernetes = store instanceof KubeStore;
  if (kubernetes) {
    const profile = documents.find((d) => d.resource.kind === 'Profile');
    if (profile)
      throw refused(
        `${profile.origin}: ${profile.label}: on the Kubernetes datastore profiles are computed from namespaces and service accounts (label those instead)`,
      );
  }
  await refuseMissingTiers(store, documents);
  if (store instanceof KubeStore) await refuseMissingNamespaces(store, documents);
  const outcomes = await retryOnConflict('apply', async () => {
    const current = await store.read(documents.map((d) => ({ get: d.key })));
    const writes: Write[] = [];
    const lines: string[] = [];
    documents.forEach((document, i) => {
      const before = current[i] as Entry<unknown> | undefined;
      if (!before) {
        writes.push({ key: document.key, create: storedDocument(document.resource, kubernetes ? undefined : new Date().toISOString()) });
        lines.push(`${document.label} created`);
        return;
      }
      const created = (before.value as { metadata?: { creationTimestamp?: string } }).metadata?.creationTimestamp;
      const next = storedDocument(document.resource, kubernetes ? undefined : created);
      if (comparable(next) === comparable(before.value)) {
        lines.push(`${document.label} unchanged`);
        return;
      }
      writes.push({ key: document.key, update: next, revision: before.revision });
      lines.push(`${document.label} configured`);
    });
    if (writes.length > 0 && !(await committed(store, writes))) return undefined;
    return lines;
  });
  return `${outcomes.join('\n')}\n`;
}

/** Deletes what exists of `targets` (in one commit); says which were deleted and which did not exist. */
export async function deleteTargets(store: Store, targets: readonly Target[]): Promise<{ text: string; missing: Target[] }> {
  if (targets.some((t) => t.key.startsWith(keys.profiles) && isDefaultAllowProfile(t.key.slice(keys.profiles.length))))
    throw refused(BUILT_IN_PROFILE);
  await refuseTiersInUse(store, targets);
  return retryOnConflict('delete', async () => {
    const current = await store.read(targets.map((t) => ({ get: t.key })));
    const writes: Write[] = [];
    const lines: string[] = [];
    const missing: Target[] = [];
    targets.forEach((target, i) => {
      const before = current[i] as Entry<unknown> | undefined;
      if (!before) {
        missing.push(target);
        lines.push(`${target.label} did not exist`);
        return;
      }
      writes.push({ key: target.key, remove: true, revision: before.revision });
      lines.push(`${target.label} deleted`);
    });
    if (writes.length > 0 && !(await committed(store, writes))) return undefined;
    return { text: `${lines.join('\n')}\n`, missing };
  });
}

async function committed(store: Store, writes: readonly Write[]): Promise<boolean> {
  try {
    return await store.commit(writes);
  } catch (err) {
    const undone = store.transactional ? 'nothing was written' : 'the writes before the failure were undone';
    throw refused(`${(err as Error).message} (${undone})`);
  }
}

/** On the Kubernetes datastore a namespaced resource goes in an existing namespace. */
async function refuseMissingNamespaces(store: KubeStore, documents: readonly FileDocument[]): Promise<void> {
  const namespaces = new Set(
    documents.flatMap((d) => (d.resource.metadata.namespace !== undefined ? [d.resource.metadata.namespace] : [])),
  );
  for (const namespace of namespaces) {
    if (await store.client.get(`/api/v1/namespaces/${encodeURIComponent(namespace)}`, 'get on namespaces')) continue;
    const document = documents.find((d) => d.resource.metadata.namespace === namespace) as FileDocument;
    throw refused(`${document.origin}: ${document.label}: namespace "${namespace}" does not exist`);
  }
}

async function refuseMissingTiers(store: Store, documents: readonly FileDocument[]): Promise<void> {
  const given = new Set(documents.flatMap((d) => (d.resource.kind === 'Tier' ? [d.resource.metadata.name] : [])));
  const named = documents.filter(
    (d): d is FileDocument & { resource: NetworkPolicyResource } =>
      (d.resource.kind === 'NetworkPolicy' || d.resource.kind === 'GlobalNetworkPolicy') && d.resource.spec.tier !== DEFAULT_TIER,
  );
  for (const document of named) {
    const tier = document.resource.spec.tier as string;
    if (given.has(tier) || (await store.get(keys.tier(tier)))) continue;
    throw refused(
      `${document.origin}: ${document.label}: field "spec.tier": tier "${tier}" does not exist; apply a Tier named "${tier}" first (or in the same file)`,
    );
  }
}

async function refuseTiersInUse(store: Store, targets: readonly Target[]): Promise<void> {
  const tiers = targets.filter((t) => t.key.startsWith(keys.tiers));
  if (tiers.length === 0) return;
  const deleted = new Set(targets.map((t) => t.key));
  const policies = [
    ...(await store.list<PolicyResource>(policyKindPrefix('NetworkPolicy'))),
    ...(await store.list<PolicyResource>(policyKindPrefix('GlobalNetworkPolicy'))),
  ].filter((entry) => !deleted.has(entry.key));
  for (const tier of tiers) {
    const name = tier.key.slice(keys.tiers.length);
    if (name === DEFAULT_TIER) throw refused('tier "default" always exists; it cannot be deleted');
    const users = policies.filter((entry) => (entry.value as NetworkPolicyResource).spec?.tier === name);
    if (users.length > 0)
      throw refused(
        `${tier.label} still has ${users.length} ${users.length === 1 ? 'policy' : 'policies'} (${users[0]?.key.split('/').slice(-2).join('/')}…); delete or move them first`,
      );
  }
}
