// The datastore down while pods are deleted: DEL tells the runtime to try again (11), never claims
// success while their addresses are still held, never crashes; retried once etcd is back, every DEL
// succeeds and nothing is left.
import test from 'ava';

import { requireBuilt } from '../helpers/cni.ts';
import { startEtcd } from '../helpers/etcd.ts';
import { ctl, ctlOk, etcdKeys, totalAllocated } from '../helpers/ipam.ts';
import { requireRoot, uniqueSubnet4 } from '../helpers/kernel.ts';
import { codeOf, delWithRetries, makePods, podLeftovers, run } from '../helpers/runtime.ts';
import { judgeRun } from '../fuzz/lib/exec.ts';

test('DEL with etcd down fails with 11 and holds the address; retried after etcd is back, it succeeds and nothing is left', async (t) => {
  requireRoot();
  requireBuilt();
  t.timeout(5 * 60_000);
  const etcd = await startEtcd(t);
  ctlOk(t, etcd, 'pool', 'create', 'default', '--cidr', uniqueSubnet4());
  const pods = makePods(t, etcd, 6, 'deldown');
  const adds = await Promise.all(pods.map((pod) => run(pod, 'ADD')));
  t.deepEqual(
    adds.map((a) => a.status),
    pods.map(() => 0),
  );

  await etcd.stop();
  const down = await Promise.all(pods.map((pod) => run(pod, 'DEL')));
  t.deepEqual(
    down.map((d) => judgeRun(d, [11], { mustFail: true })),
    pods.map(() => undefined),
    `DEL while etcd is down: ${down[0]?.stdout}`,
  );
  t.log(`DEL with etcd down: codes ${JSON.stringify(down.map(codeOf))}`);

  await etcd.start();
  t.is(totalAllocated(t, etcd), pods.length, 'the addresses are still held: no DEL pretended to release them');
  const retried = await Promise.all(pods.map((pod) => delWithRetries(pod)));
  t.deepEqual(
    retried.map((d) => d.status),
    pods.map(() => 0),
    retried.find((d) => d.status !== 0)?.stdout,
  );
  t.is(totalAllocated(t, etcd), 0);
  t.deepEqual(await etcdKeys(t, etcd, '/netplug/ipam/v2/handle/'), []);
  t.deepEqual(await etcdKeys(t, etcd, '/netplug/resources/v3/projectnet.org/workloadendpoints/'), []);
  t.deepEqual(pods.flatMap(podLeftovers), []);
  const check = ctl(etcd, 'ipam', 'check', '--grace-period', '0');
  t.is(check.status, 0, check.stdout);
});
