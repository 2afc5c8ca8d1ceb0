// etcd frozen (SIGSTOP) for 5 s in the middle of a burst of 30 ADDs: the plugin waits or tells the
// runtime to try again (11), never crashes; after the runtime's retries every pod has its own
// address, nothing is doubled or leaked, and DEL leaves nothing.
import test from 'ava';

import { requireBuilt } from '../helpers/cni.ts';
import { startEtcd } from '../helpers/etcd.ts';
import { pauseEtcd } from '../helpers/faults.ts';
import { ctlOk } from '../helpers/ipam.ts';
import { requireRoot, uniqueSubnet4 } from '../helpers/kernel.ts';
import { burstUnderFault, makePods } from '../helpers/runtime.ts';

test('etcd SIGSTOPped for 5 s during a burst of 30 ADDs: 11 or success, then 30 distinct addresses and nothing left after DEL', async (t) => {
  requireRoot();
  requireBuilt();
  t.timeout(8 * 60_000);
  const etcd = await startEtcd(t);
  ctlOk(t, etcd, 'pool', 'create', 'default', '--cidr', uniqueSubnet4());
  const pods = makePods(t, etcd, 30, 'paused');
  await burstUnderFault(t, etcd, pods, () => pauseEtcd(t, etcd, 5_000));
});
