// etcd with several endpoints, like etcd's own client: one that refuses, one that never answers
// (SIGSTOPped) and a member without a leader (a 2-member cluster with one member gone) hand the
// request to the next endpoint, and the next request starts where the last one succeeded.
import { type ChildProcess, spawn } from 'node:child_process';
import { join } from 'node:path';

import test, { type ExecutionContext } from 'ava';

import { HttpClient } from '../../ts/net/http-client.ts';
import { EtcdClient } from '../../ts/store/etcd/client.ts';
import { GatewayConnection } from '../../ts/store/etcd/http.ts';
import { tempDir } from '../helpers/cni.ts';
import { freePort, startEtcd } from '../helpers/etcd.ts';
import { eventually } from '../helpers/eventually.ts';
import { serve } from '../net/servers.ts';

test('a refused endpoint and a stopped one are passed over, and the next request starts at the one that answered', async (t) => {
  const etcd = await startEtcd(t);
  const closed = new URL(`http://127.0.0.1:${await freePort()}`);
  // Answers every request with something that is not etcd's JSON: asking it fails the test.
  const stopped = await serve(t, 'http11');
  process.kill(stopped.pid, 'SIGSTOP');
  t.teardown(() => process.kill(stopped.pid, 'SIGCONT'));
  const client = new EtcdClient(
    new GatewayConnection({ endpoints: [closed, stopped.url(), new URL(etcd.endpoints)], requestTimeoutMs: 1_000 }),
  );

  t.true(
    await client.txn([{ key: '/failover/a', target: 'VERSION', version: '0' }], [{ put: { key: '/failover/a', value: Buffer.from('1') } }]),
  );
  t.is(client.connection.current.href, new URL(etcd.endpoints).href);
  // The stopped server answers again; the next request must not go back to it.
  process.kill(stopped.pid, 'SIGCONT');
  const [kv] = await client.range('/failover/a');
  t.is(kv?.value.toString(), '1');
  t.is(client.connection.current.href, new URL(etcd.endpoints).href);

  // The answering endpoint goes away: the rotation wraps around to the first, then the second.
  await etcd.stop();
  const err = await t.throwsAsync(client.range('/failover/a'));
  t.regex(err.message, /etcd/);
  t.is(client.connection.current.href, stopped.url().href);
});

test('a member without a leader answers 503 and the request goes to the next endpoint', async (t) => {
  const members = await startPair(t);
  const other = await startEtcd(t);
  // Losing one of two members loses the quorum: the survivor has no leader.
  members.kill(1);
  const survivor = new HttpClient({ endpoints: [members.urls[0] as URL], requestTimeoutMs: 15_000 });
  let status = 0;
  for (let i = 0; i < 60 && status !== 503; i++) {
    status = (await survivor.request({ method: 'POST', path: '/v3/kv/range', body: Buffer.from('{"key":"eA=="}') })).status;
  }
  t.is(status, 503);

  const client = new EtcdClient(
    new GatewayConnection({ endpoints: [members.urls[0] as URL, new URL(other.endpoints)], requestTimeoutMs: 15_000 }),
  );
  t.deepEqual(await client.range('/failover/b'), []);
  t.is(client.connection.current.href, new URL(other.endpoints).href);
});

/** Two etcd members in one cluster on loopback; `kill(i)` SIGKILLs member i. */
async function startPair(t: ExecutionContext) {
  const dir = tempDir(t, 'etcd-pair');
  const ports = await Promise.all([0, 1, 2, 3].map(() => freePort()));
  const peer = (i: number) => `http://127.0.0.1:${ports[2 + i]}`;
  const urls = [0, 1].map((i) => new URL(`http://127.0.0.1:${ports[i]}`));
  const cluster = `m0=${peer(0)},m1=${peer(1)}`;
  const children: ChildProcess[] = [0, 1].map((i) =>
    spawn(
      'etcd',
      [
        ['--name', `m${i}`],
        ['--data-dir', join(dir, `m${i}`)],
        ['--listen-client-urls', urls[i]?.origin as string],
        ['--advertise-client-urls', urls[i]?.origin as string],
        ['--listen-peer-urls', peer(i)],
        ['--initial-advertise-peer-urls', peer(i)],
        ['--initial-cluster', cluster],
        ['--initial-cluster-state', 'new'],
        ['--log-level', 'error'],
      ].flat(),
      { stdio: 'ignore' },
    ),
  );
  t.teardown(() => {
    for (const child of children) child.kill('SIGKILL');
  });
  // Healthy once the two have elected a leader.
  for (const url of urls) {
    const http = new HttpClient({ endpoints: [url], requestTimeoutMs: 2_000 });
    await eventually(`etcd at ${url} to be healthy`, async () => (await http.request({ method: 'GET', path: '/health' })).status === 200, {
      intervalMs: 100,
    });
  }
  return { urls, kill: (i: number) => children[i]?.kill('SIGKILL') };
}
