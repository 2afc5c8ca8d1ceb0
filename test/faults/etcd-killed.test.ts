// etcd SIGKILLed in the middle of a burst of 30 ADDs and restarted on the same data directory a
// second later: ADDs succeed or fail with 11; after the runtime's retries every pod has its own
// address, nothing is doubled or leaked (what etcd had committed survives), and DEL leaves nothing.
import test from 'ava';

import { requireBuilt } from '../helpers/cni.ts';
import { startEtcd } from '../helpers/etcd.ts';
import { ctlOk } from '../helpers/ipam.ts';
import { requireRoot, uniqueSubnet4 } from '../helpers/kernel.ts';
import { burstUnderFault, makePods } from '../helpers/runtime.ts';

test('etcd SIGKILLed and restarted on its data dir during a burst of 30 ADDs: 11 or success, then 30 distinct addresses and nothing left after DEL', async (t) => {
  requireRoot();
  requireBuilt();
  t.timeout(8 * 60_000);
  const etcd = await startEtcd(t);
  ctlOk(t, etcd, 'pool', 'create', 'default', '--cidr', uniqueSubnet4());
  const pods = makePods(t, etcd, 30, 'killed');
  await burstUnderFault(t, etcd, pods, async () => {
    await etcd.stop(); // SIGKILL
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    await etcd.start(); // same data directory, same ports
  });
});
