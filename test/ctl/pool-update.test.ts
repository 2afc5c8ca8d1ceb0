// Pool changes by compare-and-swap on a real etcd: a concurrent writer between netplugctl's read
// and its commit loses nothing and is never overlooked.
import test, { type ExecutionContext } from 'ava';

import { openStore } from '../../ts/store/open.ts';
import { startEtcd } from '../helpers/etcd.ts';
import { deleteSeesConcurrentAllocation, updatesDoNotLoseEachOther } from './races.ts';

async function stores(t: ExecutionContext) {
  const etcd = await startEtcd(t);
  const [mine, other] = [await openStore(etcd.netconf), await openStore(etcd.netconf)];
  t.teardown(() => {
    mine.close();
    other.close();
  });
  return { mine, other };
}

test('etcd: concurrent updates of one pool both land', async (t) => {
  const { mine, other } = await stores(t);
  await updatesDoNotLoseEachOther(t, mine, other, '10.83.0.0/16');
});

test('etcd: a pool delete racing an allocation in the pool is refused', async (t) => {
  const { mine, other } = await stores(t);
  await deleteSeesConcurrentAllocation(t, mine, other, '10.82.0.0/16');
});
