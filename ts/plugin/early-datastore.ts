// The datastore part of early work: open and connect to the datastore the validated netconf names,
// and for netplug-ipam's ADD, issue the allocation's first reads. The address manager uses the
// reads only if it would issue exactly the same ones.
import type { CniEnvironment, Command } from '../cni/environment.ts';
import { isNetplugIpam } from '../config/ipam.ts';
import type { ParsedNetconf } from '../config/netconf.ts';
import { handleId } from '../model/keys.ts';
import { requestedFamilies } from '../ipam/address-requests.ts';
import { addReads, assumedAhead, prefetchRelease, readAhead, type Prefetched } from '../ipam/read-ahead.ts';
import { openStore } from '../store/open.ts';
import type { Store } from '../store/store.ts';
import { handled } from './handled.ts';
import { nodeName } from './nodename.ts';
import type { PluginServices } from './services.ts';
import { endpointKey, workloadOf } from './workload.ts';

/** Fields that put a network on the datastore (with netplug-ipam as its IPAM, or alone). */
const DATASTORE_FIELDS = ['datastore_type', 'etcd_endpoints', 'etcd_discovery_srv', 'etcd_authority'] as const;

/**
 * Whether this network keeps state in the datastore: with netplug-ipam, or when the netconf
 * configures a datastore. A host-local network without datastore settings runs without one.
 */
export const usesDatastore = ({ conf, json }: ParsedNetconf): boolean =>
  isNetplugIpam(conf.ipam) || DATASTORE_FIELDS.some((field) => field in json);

export interface DatastoreWork {
  store?: Promise<Store>;
  prefetched?: Prefetched;
}

export function startDatastoreWork(
  command: Command,
  program: 'netplug' | 'netplug-ipam',
  env: CniEnvironment,
  netconf: ParsedNetconf,
  services?: PluginServices,
): DatastoreWork {
  if (!usesDatastore(netconf)) return {};
  const { conf } = netconf;
  const store = handled(services?.store?.(conf) ?? openStore(conf));
  store.then(
    (s) => s.warmUp(),
    () => undefined,
  );
  if (!isNetplugIpam(conf.ipam)) return { store };
  const node = nodeName(conf.nodename);
  // An agent's DEL reads the handle and its node's blocks at once, while the host routes go.
  const known = services?.knownNodes?.(conf);
  if (command === 'DEL' && known)
    return { store, prefetched: handledPrefetch(prefetchRelease(store, handleId(conf.name, env.containerId), node, known)) };
  if (command !== 'ADD') return { store };
  const families = requestedFamilies(conf.ipam);
  const companions = program === 'netplug' ? [endpointKey(workloadOf(env, node))] : [];
  const reads = addReads(handleId(conf.name, env.containerId), node, families, companions);
  // What the agent knows already is not read again: the commit checks it.
  const assumeKnown = () => known && assumedAhead(known.fresh(node), families, companions.length, known.commits(node));
  const assumed = assumeKnown();
  if (assumed) return { store, prefetched: { reads, results: Promise.resolve(assumed) } };
  const read = () => store.then((s) => readAhead(s, reads, families, known && { node, nodes: known }));
  // Another ADD on the node is reading its facts: decide on what that read remembers (the read
  // began at most a round trip before this call; the commit checks the facts all the same).
  const inFlight = known?.factsRead(node);
  if (inFlight) return { store, prefetched: { reads, results: handled(inFlight.then(() => assumeKnown() ?? read())) } };
  const results = handled(read());
  known?.readingFacts(node, results);
  return { store, prefetched: { reads, results } };
}

function handledPrefetch(prefetched: Prefetched): Prefetched {
  handled(prefetched.results);
  return prefetched;
}
