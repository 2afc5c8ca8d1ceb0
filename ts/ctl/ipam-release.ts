// netplugctl ipam release --ip IP [--force]: the repair for a leaked address. Refuses an address
// a live workload endpoint still has (handing it out again would give two pods one address)
// unless forced.
import { releaseAddress } from '../ipam/release.ts';
import { parseIp } from '../net/cidr.ts';
import { keys } from '../model/keys.ts';
import type { WorkloadEndpoint } from '../model/workload-endpoint.ts';
import type { Store } from '../store/store.ts';
import { poolOfAddress, readIpamState } from './ipam-state.ts';
import { refused, UsageError } from './usage.ts';

export async function releaseIp(store: Store, ip: string | undefined, force: boolean): Promise<string> {
  if (!ip) throw new UsageError('ipam release needs --ip IP');
  if (!parseIp(ip)) throw new UsageError(`--ip "${ip}" is not an IP address`);
  const state = await readIpamState(store);
  if (!poolOfAddress(state, ip)) throw refused(`${ip} is not in any pool`);
  if (!force) {
    const holder = (await store.list<WorkloadEndpoint>(keys.workloadEndpoints)).find((e) =>
      e.value.spec.ipNetworks.some((n) => n.split('/')[0] === ip),
    );
    if (holder) {
      const { metadata } = holder.value;
      throw refused(
        `${ip} belongs to workload endpoint ${metadata.namespace}/${metadata.name}, which still exists; DEL that workload, or add --force`,
      );
    }
  }
  const released = await releaseAddress(store, ip);
  if (!released) throw refused(`${ip} is not allocated; nothing to release`);
  return `released ${ip} (handle ${released.handle_id}${released.secondary['node'] ? `, node ${released.secondary['node']}` : ''})\n`;
}
