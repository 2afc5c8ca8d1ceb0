// Work a command starts before its netconf is validated, because it needs only the environment
// (or the datastore settings read straight from stdin): it overlaps validation and the loading of
// the rest of the program. On a pod's path this is most of what separates netplug from a plugin
// without a runtime to start: DEL's veth deletion (the kernel waits for RCU grace periods) and
// the datastore connection both run while the main thread does everything else.
import type { CniEnvironment, Command } from '../cni/environment.ts';
import { interfacePresence, teardownWorkload, type Presence, type TeardownResult } from '../dataplane/index.ts';
import { nodeName } from '../config/nodename.ts';
import { handleId, keys } from '../ipam/model.ts';
import type { Family } from '../ipam/cidr.ts';
import { addReads, readAhead, requestedFamilies, type Prefetched } from '../ipam/netplug-ipam.ts';
import { openStore, type DatastoreSettings } from '../store/open.ts';
import type { Read, Store } from '../store/store.ts';
import { hostInterfaceName } from './host-interface.ts';
import { CNI_ENDPOINT_NAMESPACE, workloadEndpointName } from './workload-endpoint.ts';

export interface EarlyWork {
  /** DEL: the workload interface's removal, under way. */
  teardown?: Promise<TeardownResult>;
  /** ADD: what is at the workload interface's name. */
  presence?: Promise<Presence>;
  /** The datastore, opening and connecting. */
  store?: Promise<Store>;
  /** ADD with netplug-ipam: the allocation's first reads, already asked of the datastore. */
  prefetched?: Prefetched;
}

/** Fields that put a network on the datastore (with netplug-ipam as its IPAM, or alone). */
export const DATASTORE_FIELDS = ['datastore_type', 'etcd_endpoints', 'etcd_discovery_srv', 'etcd_authority'] as const;
const SETTINGS = [...DATASTORE_FIELDS, 'etcd_scheme', 'etcd_key_file', 'etcd_cert_file', 'etcd_ca_cert_file'] as const;

export function startEarlyWork(command: Command, program: 'netplug' | 'netplug-ipam', env: CniEnvironment, stdin: Buffer): EarlyWork {
  const work: EarlyWork = {};
  if (program === 'netplug' && command === 'DEL') work.teardown = handled(teardownWorkload(env.netns, env.ifname));
  if (program === 'netplug' && command === 'ADD') work.presence = handled(interfacePresence(env.netns, env.ifname, hostInterfaceName(env)));
  const json = rawJson(stdin);
  const settings = json && datastoreSettings(json);
  if (json && settings) {
    const store = handled(openStore(settings));
    store.then((s) => s.warmUp(), () => undefined);
    work.store = store;
    const ahead = command === 'ADD' ? allocationReads(json, env, program) : undefined;
    if (ahead) work.prefetched = { reads: ahead.reads, results: handled(store.then((s) => readAhead(s, ahead.reads, ahead.families))) };
  }
  return work;
}

/** Waits for whatever early work is still running (a thread in the kernel must finish first). */
export async function settle(work: EarlyWork): Promise<void> {
  await Promise.allSettled([work.teardown, work.presence]);
}

function rawJson(stdin: Buffer): Record<string, unknown> | undefined {
  try {
    const json: unknown = JSON.parse(stdin.toString('utf8'));
    return json && typeof json === 'object' && !Array.isArray(json) ? (json as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

/**
 * The reads netplug-ipam's ADD starts with, from the raw netconf: a guess that validation
 * confirms (the ADD uses them only if it would issue exactly the same reads).
 */
function allocationReads(json: Record<string, unknown>, env: CniEnvironment, program: 'netplug' | 'netplug-ipam'): { reads: Read[]; families: Family[] } | undefined {
  const ipam = json['ipam'] as Record<string, unknown> | undefined;
  const { name, nodename } = json;
  if (ipam?.['type'] !== 'netplug-ipam' || typeof name !== 'string' || (nodename !== undefined && typeof nodename !== 'string')) return undefined;
  const node = nodeName(nodename);
  const endpoint = keys.workloadEndpoint(CNI_ENDPOINT_NAMESPACE, workloadEndpointName(node, 'cni', env.containerId, env.ifname));
  const families = requestedFamilies(ipam);
  return { reads: addReads(handleId(name, env.containerId), node, families, program === 'netplug' ? [endpoint] : []), families };
}

/**
 * The datastore settings of the netconf, if it uses a datastore and they are all strings;
 * anything else waits for validation, which reports it properly.
 */
function datastoreSettings(json: Record<string, unknown>): DatastoreSettings | undefined {
  const ipam = json['ipam'] as { type?: unknown } | undefined;
  const uses = ipam?.type === 'netplug-ipam' || DATASTORE_FIELDS.some((field) => field in json);
  if (!uses || SETTINGS.some((field) => json[field] !== undefined && typeof json[field] !== 'string')) return undefined;
  return Object.fromEntries(SETTINGS.filter((field) => json[field] !== undefined).map((field) => [field, json[field]])) as DatastoreSettings;
}

/** The same promise, with its failure marked as handled: whoever awaits it later still sees it. */
function handled<T>(promise: Promise<T>): Promise<T> {
  promise.catch(() => undefined);
  return promise;
}
