// What every plugin command works with: the validated environment and netconf, the logger, the
// datastore (opened on first use, shared by address management and workload endpoints), the
// node's name, and the address manager the netconf chooses.
import { readFileSync } from 'node:fs';

import type { CniEnvironment } from '../cni/environment.ts';
import { isNetplugIpam } from '../config/ipam.ts';
import type { Netconf, ParsedNetconf } from '../config/netconf.ts';
import { nodeName } from '../config/nodename.ts';
import { DelegatedIpam } from '../ipam/delegated.ts';
import type { Ipam } from '../ipam/ipam.ts';
import { NetplugIpam, type Prefetched } from '../ipam/netplug-ipam.ts';
import type { Logger } from '../log/logger.ts';
import { openStore } from '../store/open.ts';
import type { Store } from '../store/store.ts';
import { DATASTORE_FIELDS } from './early-datastore.ts';
import { CNI_ENDPOINT_NAMESPACE, workloadEndpointName } from './workload-endpoint.ts';

/** Written by the node agent when the netconf leaves `mtu` out (as the reference's). */
export const MTU_FILE = '/var/lib/netplug/mtu';

export interface PluginContext {
  env: CniEnvironment;
  netconf: ParsedNetconf;
  conf: Netconf;
  log: Logger;
  ipam: Ipam;
  node: string;
  /**
   * Whether this network keeps state in the datastore (workload endpoints for the policy agent):
   * with netplug-ipam, or when the netconf configures a datastore. A host-local network without
   * datastore settings runs without one.
   */
  usesDatastore: boolean;
  store(): Promise<Store>;
  /** With a datastore, starts opening it and connecting, to overlap whatever comes first. */
  warmUp(): void;
  close(): void;
}


export interface ContextOptions {
  /**
   * The command is the plugin's (not netplug-ipam serving another plugin), so its addresses are
   * recorded with the workload endpoint they belong to, for `netplugctl ipam check`.
   */
  writesEndpoint?: boolean;
  /** The datastore, already being opened from the same settings (early work). */
  store?: Promise<Store>;
  /** The allocation's first reads, already under way (early work). */
  prefetched?: Prefetched;
}

export function createContext(env: CniEnvironment, netconf: ParsedNetconf, log: Logger, options: ContextOptions = {}): PluginContext {
  const { conf } = netconf;
  const writesEndpoint = options.writesEndpoint ?? true;
  let opened: Promise<Store> | undefined = options.store;
  const store = () => (opened ??= openStore(conf));
  const node = nodeName(conf.nodename);
  const usesDatastore = isNetplugIpam(conf.ipam) || DATASTORE_FIELDS.some((field) => field in netconf.json);
  const endpoint = `${CNI_ENDPOINT_NAMESPACE}/${workloadEndpointName(node, 'cni', env.containerId, env.ifname)}`;
  const workload = writesEndpoint && usesDatastore ? { endpoint } : undefined;
  const ipam: Ipam = isNetplugIpam(conf.ipam)
    ? new NetplugIpam({ env, netconf, log: log.child('ipam'), store, node, ...(workload ? { workload } : {}), ...(options.prefetched ? { prefetched: options.prefetched } : {}) })
    : new DelegatedIpam(env, netconf, log.child('ipam'));
  return {
    env,
    netconf,
    conf,
    log,
    ipam,
    node,
    usesDatastore,
    store,
    warmUp: () => {
      if (usesDatastore) store().then((s) => s.warmUp(), () => undefined); // failures surface on first use
    },
    close: () => void opened?.then((s) => s.close(), () => undefined),
  };
}

/** The netconf's MTU, else the node's MTU file, else the kernel default (undefined). */
export function workloadMtu(conf: Netconf): number | undefined {
  if (conf.mtu !== undefined) return conf.mtu;
  try {
    const value = Number(readFileSync(MTU_FILE, 'utf8').trim());
    return Number.isInteger(value) && value >= 68 ? value : undefined;
  } catch {
    return undefined;
  }
}
