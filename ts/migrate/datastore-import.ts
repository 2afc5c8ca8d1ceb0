// `netplugctl datastore migrate import`: an export written into the Kubernetes datastore.
//
// Checked before anything is written: the target holds no netplug IPAM data other than this
// export's (documents equal to the file's are an earlier run of this import that stopped part-way,
// and are kept), and which exported nodes have no Kubernetes Node. Then written in SECTIONS'
// order: ClusterInformation locked first, so nothing allocates from a half-written datastore;
// pools last, so that without them nothing could allocate even if it were unlocked early. A crash
// part-way leaves a locked datastore without (all of) its pools; running the same import again
// creates only what is missing. Finally every document is read back and compared with the file.
//
// The nodes' addresses (underlay, tunnel addresses and MACs) go onto their Kubernetes Nodes as the
// annotations netplug-node publishes there: while netplug-node rolls node by node onto the
// Kubernetes datastore, the nodes already switched read the others' addresses from these, and
// without them would remove their routes to every node not switched yet. An annotation already
// there (a switched node's own) is kept.
import { CLUSTER_INFO_KEY, datastoreLocked } from '../model/cluster-information.ts';
import { setDatastoreReady } from '../ipam/cluster-info.ts';
import type { NodeSpec } from '../model/node.ts';
import { nodeAddressAnnotations } from '../store/kubernetes/documents.ts';
import { NODES_PREFIX } from '../store/kubernetes/resources.ts';
import type { Entry, Store } from '../store/store.ts';
import { refused } from '../ctl/usage.ts';
import { SECTIONS, type DatastoreExport, type Exported, type SectionName } from './datastore-document.ts';

/** The sections an import writes (nodes are the cluster's Node objects; ClusterInformation is written on its own). */
const WRITTEN = SECTIONS.filter((s) => s.name !== 'nodes' && s.name !== 'clusterInformation');

/** Creates at once within a section: the API server takes them one request each. */
const PARALLEL_CREATES = 8;

export interface ImportReport {
  created: Partial<Record<SectionName, number>>;
  /** Documents an earlier, interrupted run of this import had written already. */
  alreadyThere: number;
  /** Nodes the export names (registrations, block affinities) that have no Kubernetes Node. */
  missingNodes: string[];
  /** `node: key=value` labels of an exported registration that its Kubernetes Node lacks (pool node selectors match Node labels). */
  labelsMissing: string[];
  /** Nodes whose exported addresses were written onto their Kubernetes Node (those it lacked). */
  addressesCarried: string[];
}

/** Adds annotations to a Kubernetes Node (KubeStore.annotateNode). */
export type AnnotateNode = (name: string, annotations: Record<string, string>) => Promise<void>;

export async function importDatastore(store: Store, data: DatastoreExport, annotateNode?: AnnotateNode): Promise<ImportReport> {
  const targetInfo = await store.get(CLUSTER_INFO_KEY);
  const existing = new Map<string, Entry<unknown>>();
  for (const section of WRITTEN) for (const entry of await store.list(section.prefix)) existing.set(entry.key, entry);
  const fromFile = new Map(WRITTEN.flatMap((s) => data.sections[s.name].map((e) => [e.key, e] as const)));
  const foreign = [...existing.values()].filter((entry) => !sameDocument(entry.value, fromFile.get(entry.key)?.value));
  if (foreign.length > 0) {
    throw refused(
      `${store.description} already holds netplug IPAM data that is not this export's (${foreign.length} documents, such as ${foreign[0]?.key}): import only into a datastore without netplug IPAM data`,
    );
  }
  const kubeNodes = new Map((await store.list(NODES_PREFIX)).map((e) => [e.key.slice(NODES_PREFIX.length), e.value]));
  const nodes = nodeCheck(kubeNodes, data);

  // The lock first: from here on nothing allocates until `unlock`.
  const exportedInfo = data.sections.clusterInformation[0];
  if (targetInfo) {
    if (!datastoreLocked(targetInfo)) await setDatastoreReady(store, false);
  } else if (exportedInfo) {
    const value = exportedInfo.value as { spec?: Record<string, unknown> };
    const locked = { ...value, spec: { ...value.spec, datastoreReady: false } };
    if (!(await store.commit([{ key: CLUSTER_INFO_KEY, create: locked }]))) await setDatastoreReady(store, false);
  } else {
    await setDatastoreReady(store, false);
  }

  const addressesCarried = annotateNode ? await carryNodeAddresses(kubeNodes, data, annotateNode) : [];
  const created: ImportReport['created'] = {};
  for (const section of WRITTEN) {
    const missing = data.sections[section.name].filter((entry) => !existing.has(entry.key));
    for (let i = 0; i < missing.length; i += PARALLEL_CREATES)
      await Promise.all(missing.slice(i, i + PARALLEL_CREATES).map((entry) => create(store, entry)));
    created[section.name] = missing.length;
  }
  await verify(store, fromFile);
  return { created, alreadyThere: existing.size, ...nodes, addressesCarried };
}

/** Creates `entry`; one that appeared meanwhile must be the same document. */
async function create(store: Store, entry: Exported): Promise<void> {
  if (await store.commit([{ key: entry.key, create: entry.value }])) return;
  const now = await store.get(entry.key);
  if (!sameDocument(now?.value, entry.value))
    throw new Error(`${entry.key} was created by someone else during the import with other content`);
}

/** Every written document reads back as exported (a CRD of another release could drop fields). */
async function verify(store: Store, fromFile: Map<string, Exported>): Promise<void> {
  const stored = new Map<string, unknown>();
  for (const section of WRITTEN) for (const entry of await store.list(section.prefix)) stored.set(entry.key, entry.value);
  for (const [key, entry] of fromFile) {
    if (!stored.has(key)) throw new Error(`${key} is missing after the import; run the same import again`);
    if (!sameDocument(stored.get(key), entry.value))
      throw new Error(
        `${key} reads back different from the export: install this release's custom resource definitions (deploy/crds/) and run the import again`,
      );
  }
}

/** Which nodes of the export have no Kubernetes Node, and registration labels their Node lacks. */
function nodeCheck(kubeNodes: ReadonlyMap<string, unknown>, data: DatastoreExport): Pick<ImportReport, 'missingNodes' | 'labelsMissing'> {
  const named = new Set<string>();
  const labelsMissing: string[] = [];
  for (const { key, value } of data.sections.nodes) {
    const name = key.slice(NODES_PREFIX.length);
    named.add(name);
    const kubeNode = kubeNodes.get(name);
    if (!kubeNode) continue;
    const kubeLabels = labelsOf(kubeNode);
    for (const [label, wanted] of Object.entries(labelsOf(value)))
      if (kubeLabels[label] !== wanted) labelsMissing.push(`${name}: ${label}=${wanted}`);
  }
  const affinityPrefix = SECTIONS.find((s) => s.name === 'blockAffinities')?.prefix ?? '';
  for (const { key } of data.sections.blockAffinities) named.add(key.slice(affinityPrefix.length).split('/')[0] ?? '');
  return { missingNodes: [...named].filter((name) => name !== '' && !kubeNodes.has(name)).sort(), labelsMissing };
}

/** Each exported node's addresses that its Kubernetes Node has no annotation for, written; the nodes written. */
async function carryNodeAddresses(
  kubeNodes: ReadonlyMap<string, unknown>,
  data: DatastoreExport,
  annotate: AnnotateNode,
): Promise<string[]> {
  const carried: string[] = [];
  for (const { key, value } of data.sections.nodes) {
    const name = key.slice(NODES_PREFIX.length);
    const kubeNode = kubeNodes.get(name);
    if (!kubeNode) continue;
    const present = nodeAddressAnnotations(specOf(kubeNode));
    const missing = Object.entries(nodeAddressAnnotations(specOf(value))).filter(
      (entry): entry is [string, string] => typeof entry[1] === 'string' && present[entry[0]] === null,
    );
    if (missing.length === 0) continue;
    await annotate(name, Object.fromEntries(missing));
    carried.push(name);
  }
  return carried;
}

function specOf(value: unknown): NodeSpec | undefined {
  const spec = (value as { spec?: unknown } | undefined)?.spec;
  return typeof spec === 'object' && spec !== null ? (spec as NodeSpec) : undefined;
}

function labelsOf(value: unknown): Record<string, string> {
  const labels = (value as { metadata?: { labels?: unknown } } | undefined)?.metadata?.labels;
  return typeof labels === 'object' && labels !== null ? (labels as Record<string, string>) : {};
}

/** Equal as JSON, whatever the order of object keys. */
function sameDocument(a: unknown, b: unknown): boolean {
  return canonicalJson(a) === canonicalJson(b);
}

function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (typeof value === 'object' && value !== null) {
    const fields = Object.entries(value as Record<string, unknown>).filter(([, v]) => v !== undefined);
    return `{${fields
      .sort(([x], [y]) => (x < y ? -1 : x > y ? 1 : 0))
      .map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`)
      .join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}
