// The policy resources netplugctl reads from files and names on its command line: YAML or JSON, one
// document or several (`---`), a `kind: List` of items, or stdin (`-f -`); kinds by their name,
// plural or short name. Every document is checked (ts/model/policy-check.ts) before anything is
// written; a mistake names the file, the document and the field.
import { readFileSync } from 'node:fs';

import { loadAll } from 'js-yaml';

import { checkPolicyDocument, PolicyDocumentError } from '../model/policy-check.ts';
import { policyResourceKey, resourceName, type PolicyKind, type PolicyResource } from '../model/policy.ts';
import { UsageError } from './usage.ts';

/** What netplugctl calls each kind on its command line. */
const KIND_NAMES: Record<string, PolicyKind> = {};
for (const [kind, names] of [
  ['NetworkPolicy', ['networkpolicy', 'networkpolicies', 'netpol', 'np']],
  ['GlobalNetworkPolicy', ['globalnetworkpolicy', 'globalnetworkpolicies', 'gnp']],
  ['NetworkSet', ['networkset', 'networksets', 'netset']],
  ['GlobalNetworkSet', ['globalnetworkset', 'globalnetworksets', 'gns']],
  ['Tier', ['tier', 'tiers']],
  ['Profile', ['profile', 'profiles', 'pro']],
] as const)
  for (const name of names) KIND_NAMES[name] = kind;

export function kindOfName(name: string): PolicyKind {
  const kind = KIND_NAMES[name.toLowerCase()];
  if (!kind)
    throw new UsageError(
      `kind "${name}" is not one netplugctl knows: networkpolicy (np), globalnetworkpolicy (gnp), networkset, globalnetworkset, tier, profile`,
    );
  return kind;
}

/** A checked resource from a file, with where it came from (for messages). */
export interface FileDocument {
  resource: PolicyResource;
  key: string;
  /** `NetworkPolicy "shop/web"` */
  label: string;
  /** `policy.yaml, document 2` */
  origin: string;
}

const labelOf = (resource: PolicyResource): string => `${resource.kind} "${resourceName(resource)}"`;

/** Every resource of the files (`-` is stdin), checked; the first mistake is a UsageError naming the file and document. */
export function readPolicyFiles(paths: readonly string[], namespace: string | undefined, stdin: () => string): FileDocument[] {
  const out: FileDocument[] = [];
  for (const path of paths) {
    let text: string;
    try {
      text = path === '-' ? stdin() : readFileSync(path, 'utf8');
    } catch (err) {
      throw new UsageError(`-f ${path}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
    }
    const name = path === '-' ? 'stdin' : path;
    let documents: unknown[];
    try {
      documents = loadAll(text).filter((d) => d !== null && d !== undefined);
    } catch (err) {
      throw new UsageError(`${name} is neither YAML nor JSON: ${(err as Error).message.split('\n')[0]}`);
    }
    const items = documents.flatMap((document, i) => {
      const list = document as { kind?: unknown; items?: unknown };
      const origin = `${name}, document ${i + 1}`;
      if (list.kind === 'List' && Array.isArray(list.items))
        return list.items.map((item, j) => ({ item, origin: `${origin}, item ${j + 1}` }));
      return [{ item: document, origin }];
    });
    if (items.length === 0) throw new UsageError(`${name} holds no document`);
    for (const { item, origin } of items) out.push(checked(item, origin, namespace));
  }
  const seen = new Map<string, string>();
  for (const document of out) {
    const earlier = seen.get(document.key);
    if (earlier) throw new UsageError(`${document.origin}: ${document.label} is also in ${earlier}`);
    seen.set(document.key, document.origin);
  }
  return out;
}

function checked(item: unknown, origin: string, namespace: string | undefined): FileDocument {
  const kind = (item as { kind?: unknown; apiVersion?: unknown } | null)?.kind;
  const apiVersion = (item as { apiVersion?: unknown } | null)?.apiVersion;
  if (typeof apiVersion === 'string' && apiVersion.startsWith('networking.k8s.io/'))
    throw new UsageError(
      `${origin}: a Kubernetes ${String(kind)} (${apiVersion}): apply it with kubectl; netplugctl writes netplug's resources (projectnet.org/v3)`,
    );
  const given = (item as { metadata?: { namespace?: unknown } } | null)?.metadata?.namespace;
  if (namespace !== undefined && typeof given === 'string' && given !== namespace)
    throw new UsageError(`${origin}: its namespace "${given}" is not -n ${namespace}`);
  try {
    const resource = checkPolicyDocument(item, namespace);
    return {
      resource,
      key: policyResourceKey(resource.kind, resource.metadata.name, resource.metadata.namespace),
      label: labelOf(resource),
      origin,
    };
  } catch (err) {
    if (err instanceof PolicyDocumentError) throw new UsageError(`${origin}: ${err.message}`);
    throw err;
  }
}

/** The document as stored: kind, apiVersion, the metadata a user gives (no server fields), spec. */
export function storedDocument(resource: PolicyResource, creationTimestamp?: string): PolicyResource {
  const { name, namespace, labels, annotations } = resource.metadata;
  return {
    ...resource,
    metadata: {
      name,
      ...(namespace !== undefined ? { namespace } : {}),
      ...(labels && Object.keys(labels).length > 0 ? { labels } : {}),
      ...(annotations && Object.keys(annotations).length > 0 ? { annotations } : {}),
      ...(creationTimestamp ? { creationTimestamp } : {}),
    },
  } as PolicyResource;
}
