// The plugin SIGKILLed at seeded random moments of 30 concurrent ADDs (from before Node is up to
// after the commit), then DELed as a runtime does, retrying until DEL succeeds: nothing is left in
// the datastore or the kernel. Then the same 30 pods are added for real: 30 distinct addresses.
import test from 'ava';

import { requireBuilt } from '../helpers/cni.ts';
import { startEtcd } from '../helpers/etcd.ts';
import { ctl, ctlOk, etcdKeys, totalAllocated } from '../helpers/ipam.ts';
import { requireRoot, uniqueSubnet4 } from '../helpers/kernel.ts';
import { addressOf, addWithRetries, delWithRetries, makePods, podLeftovers, run } from '../helpers/runtime.ts';
import { FUZZ_SEED, Rng } from '../fuzz/lib/prng.ts';

test('plugin SIGKILLed at random points of 30 ADDs, then DELed with retries: nothing left; re-added: 30 distinct addresses', async (t) => {
  requireRoot();
  requireBuilt();
  t.timeout(8 * 60_000);
  const etcd = await startEtcd(t);
  ctlOk(t, etcd, 'pool', 'create', 'default', '--cidr', uniqueSubnet4());
  const pods = makePods(t, etcd, 30, 'sigkill');
  const rng = Rng.forCase('plugin-killed', 0);
  // Up to 8 s: 30 plugins starting at once on a loaded node take seconds, so some finish, most do not.
  const delays = pods.map(() => rng.int(8_000));
  t.log(`kill delays (ms, NETPLUG_FUZZ_SEED=${FUZZ_SEED}): ${delays.join(' ')}`);
  const killed = await Promise.all(
    pods.map((pod, i) =>
      run(pod, 'ADD', {
        onSpawn: (child) => void setTimeout(() => child.kill('SIGKILL'), delays[i]),
      }),
    ),
  );
  t.log(`${killed.filter((o) => o.status === 0).length} of 30 finished before their kill`);

  const dels = await Promise.all(pods.map((pod) => delWithRetries(pod)));
  t.deepEqual(
    dels.map((d) => d.status),
    pods.map(() => 0),
    `DEL after a killed ADD succeeds: ${dels.find((d) => d.status !== 0)?.stdout}`,
  );
  t.is(totalAllocated(t, etcd), 0, 'no address left');
  t.deepEqual(await etcdKeys(t, etcd, '/netplug/ipam/v2/handle/'), [], 'no handle left');
  t.deepEqual(await etcdKeys(t, etcd, '/netplug/ipam/v2/pending/'), [], 'no pending request left');
  t.deepEqual(await etcdKeys(t, etcd, '/netplug/resources/v3/projectnet.org/workloadendpoints/'), [], 'no workload endpoint left');
  t.deepEqual(pods.flatMap(podLeftovers), [], 'no link left');
  const check = ctl(etcd, 'ipam', 'check', '--grace-period', '0');
  t.is(check.status, 0, check.stdout);

  const added = await Promise.all(pods.map(async (pod) => addWithRetries(pod, await run(pod, 'ADD'))));
  t.deepEqual(
    added.map((o) => o.status),
    pods.map(() => 0),
  );
  t.is(new Set(added.map(addressOf)).size, 30, 'distinct addresses');
  t.is(totalAllocated(t, etcd), 30);
  const final = await Promise.all(pods.map((pod) => delWithRetries(pod)));
  t.deepEqual(
    final.map((d) => d.status),
    pods.map(() => 0),
  );
  t.is(totalAllocated(t, etcd), 0);
  t.deepEqual(pods.flatMap(podLeftovers), []);
});
