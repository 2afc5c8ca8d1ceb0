// The datastore part of early work: open and connect to the datastore the raw netconf names, and
// for netplug-ipam's ADD, issue the allocation's first reads. A guess that validation confirms:
// an ADD uses the reads only if it would issue exactly the same ones.
import type { CniEnvironment, Command } from '../cni/environment.ts';
import { nodeName } from '../config/nodename.ts';
import type { Family } from '../ipam/cidr.ts';
import { handleId } from '../ipam/model.ts';
import { addReads, readAhead, requestedFamilies } from '../ipam/netplug-ipam.ts';
import { openStore, type DatastoreSettings } from '../store/open.ts';
import type { Read } from '../store/store.ts';
import { handled, type EarlyWork } from './early.ts';
import { endpointKey, workloadOf } from './workload.ts';

/** Fields that put a network on the datastore (with netplug-ipam as its IPAM, or alone). */
export const DATASTORE_FIELDS = ['datastore_type', 'etcd_endpoints', 'etcd_discovery_srv', 'etcd_authority'] as const;
const SETTINGS = [...DATASTORE_FIELDS, 'etcd_scheme', 'etcd_key_file', 'etcd_cert_file', 'etcd_ca_cert_file'] as const;

export function startDatastoreWork(
  command: Command,
  program: 'netplug' | 'netplug-ipam',
  env: CniEnvironment,
  json: Record<string, unknown> | undefined,
): EarlyWork {
  const settings = json && datastoreSettings(json);
  if (!json || !settings) return {};
  const store = handled(openStore(settings));
  store.then(
    (s) => s.warmUp(),
    () => undefined,
  );
  const ahead = command === 'ADD' ? allocationReads(json, env, program) : undefined;
  return {
    store,
    ...(ahead
      ? { prefetched: { reads: ahead.reads, results: handled(store.then((s) => readAhead(s, ahead.reads, ahead.families))) } }
      : {}),
  };
}

export function rawJson(stdin: Buffer): Record<string, unknown> | undefined {
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
function allocationReads(
  json: Record<string, unknown>,
  env: CniEnvironment,
  program: 'netplug' | 'netplug-ipam',
): { reads: Read[]; families: Family[] } | undefined {
  const ipam = json['ipam'] as Record<string, unknown> | undefined;
  const { name, nodename } = json;
  if (ipam?.['type'] !== 'netplug-ipam' || typeof name !== 'string' || (nodename !== undefined && typeof nodename !== 'string'))
    return undefined;
  const node = nodeName(nodename);
  const endpoint = endpointKey(workloadOf(env, node));
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
  const settings = Object.fromEntries(
    SETTINGS.filter((field) => json[field] !== undefined).map((field) => [field, json[field]]),
  ) as DatastoreSettings;
  if (settings.datastore_type !== 'kubernetes') return settings;
  // The Kubernetes datastore also needs the API's settings; odd ones wait for validation too.
  const kube = json['kubernetes'] as Record<string, unknown> | undefined;
  const fields = ['kubeconfig', 'k8s_api_root'] as const;
  if (!kube || typeof kube !== 'object' || fields.some((f) => kube[f] !== undefined && typeof kube[f] !== 'string')) return undefined;
  return { ...settings, kubernetes: Object.fromEntries(fields.filter((f) => kube[f] !== undefined).map((f) => [f, kube[f]])) };
}
