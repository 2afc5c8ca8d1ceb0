// What every plugin command works with: the validated environment and netconf, the logger and
// the address manager chosen by the netconf.
import { readFileSync } from 'node:fs';

import type { CniEnvironment } from '../cni/environment.ts';
import type { Netconf, ParsedNetconf } from '../config/netconf.ts';
import { DelegatedIpam } from '../ipam/delegated.ts';
import type { Ipam } from '../ipam/ipam.ts';
import type { Logger } from '../log/logger.ts';

/** Written by the node agent when the netconf leaves `mtu` out (as the reference's). */
export const MTU_FILE = '/var/lib/netplug/mtu';

export interface PluginContext {
  env: CniEnvironment;
  netconf: ParsedNetconf;
  conf: Netconf;
  log: Logger;
  ipam: Ipam;
}

export function createContext(env: CniEnvironment, netconf: ParsedNetconf, log: Logger): PluginContext {
  // netplug-ipam runs in-process once it has its datastore; until then every manager, netplug-ipam
  // included, is executed from CNI_PATH.
  const ipam = new DelegatedIpam(env, netconf, log.child('ipam'));
  return { env, netconf, conf: netconf.conf, log, ipam };
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
