// netplug-install --upgrade-ipam, v3.30's init container `upgrade-ipam`: moves host-local's
// allocations on this node into netplug-ipam. Deliberately the reference's naive migration
// (calico#11702): it runs whatever IPAM the conflist uses and deletes host-local's files, so on a
// host-local install host-local hands out again addresses that running pods hold. The 3.31
// procedures remove this container (spec "Host-local installs: extra steps").
import { existsSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';

import { allocate } from '../ipam/allocator.ts';
import { handleId } from '../ipam/model.ts';
import { listPools } from '../ipam/pools.ts';
import { parseIp } from '../net/cidr.ts';
import { openNodeStore } from '../node/open-datastore.ts';
import { NodeSettingsError, nodeSettings } from '../node/settings.ts';
import type { Log } from './log.ts';

/** host-local's data directory (its default dataDir), under the host root the pod mounts. */
export const HOST_LOCAL_DATA_DIR = '/var/lib/cni/networks';

/** The network's name in the conflist template (CNI_NETWORK_CONFIG), placeholders filled with anything. */
function networkName(template: string | undefined): string | undefined {
  if (!template) return undefined;
  try {
    const name = JSON.parse(template.replace(/__[A-Z0-9_]+__/g, '0')).name;
    return typeof name === 'string' && name ? name : undefined;
  } catch {
    return undefined;
  }
}

export async function upgradeIpam(env: NodeJS.ProcessEnv, log: Log): Promise<number> {
  const network = networkName(env.CNI_NETWORK_CONFIG);
  if (!network) {
    log('ERROR', 'CNI_NETWORK_CONFIG must hold the conflist template with its "name"');
    return 1;
  }
  const dir = join(env.NETPLUG_HOST_ROOT || '/host', HOST_LOCAL_DATA_DIR, network);
  // host-local keeps one file per address (named by it) plus last_reserved_ip.N and lock.
  const files = existsSync(dir) ? readdirSync(dir).filter((name) => parseIp(name) !== undefined) : [];
  if (files.length === 0) {
    log('INFO', `no host-local allocations in ${dir}`);
    return 0;
  }
  let settings: ReturnType<typeof nodeSettings>;
  try {
    settings = nodeSettings(env);
  } catch (err) {
    if (!(err instanceof NodeSettingsError)) throw err;
    log('ERROR', err.message);
    return 1;
  }
  try {
    const store = await openNodeStore(settings, env);
    const pools = await listPools(store);
    const node = settings.nodeName;
    let moved = 0;
    for (const ip of files) {
      const path = join(dir, ip);
      const [containerId = '', ifname = 'eth0'] = readFileSync(path, 'utf8')
        .split(/\r?\n/)
        .map((line) => line.trim());
      if (!containerId) continue;
      const attributes = { node, ifname, timestamp: new Date().toISOString() };
      try {
        await allocate({ store, handle: handleId(network, containerId), node, attributes }, [{ ip, pools }], { pools });
      } catch (err) {
        log('WARNING', `${ip} (container ${containerId}) not moved: ${(err as Error).message}`);
        continue;
      }
      rmSync(path);
      moved++;
    }
    log('INFO', `moved ${moved} of ${files.length} host-local allocation(s) of network "${network}" into netplug-ipam`);
    return 0;
  } catch (err) {
    log('ERROR', `upgrade-ipam failed: ${(err as Error).message}`);
    return 1;
  }
}
