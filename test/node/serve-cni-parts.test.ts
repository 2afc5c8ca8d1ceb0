// The CNI server's parts on their own: which netconfs the agent serves with its own datastore
// connection, IPAM turns per node, the store pool's lending, and the server's handling of a
// malformed connection (in-process, on a socket in a temporary directory).
import { mkdirSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { join } from 'node:path';

import test from 'ava';

import { isAgentDatastore, nodeTurns } from '../../ts/node/cni/cni-services.ts';
import { StorePool } from '../../ts/node/cni/cni-store-pool.ts';
import { serveCni } from '../../ts/node/cni/serve-cni.ts';
import type { NodeSettings } from '../../ts/node/shared/settings.ts';
import { Logger } from '../../ts/log/logger.ts';
import { HttpClient } from '../../ts/net/http-client.ts';
import type { Store } from '../../ts/store/store.ts';
import { callAgent, waitServing } from '../helpers/agent-client.ts';
import { tempDir } from '../helpers/cni.ts';
import { answerOrder, serve } from '../net/servers.ts';

const settings = (datastoreType: 'etcdv3' | 'kubernetes', etcd: NodeSettings['etcd'] = {}) => ({ datastoreType, etcd }) as NodeSettings;

test("a turn's requests go ahead of other commands' waiting on the same connection", async (t) => {
  const server = await serve(t, 'http11');
  const http = new HttpClient({ endpoints: [server.url()] });
  const { get, answered } = answerOrder(http);
  const reads = ['/read-1', '/read-2', '/read-3'].map(get);
  const turn = nodeTurns()('node-a', () => get('/turn'));
  await Promise.all([...reads, turn]);
  t.deepEqual(answered, ['GET /read-1', 'GET /turn', 'GET /read-2', 'GET /read-3']);
});

test("the agent's own datastore: the same type and, on etcd, the same endpoints in any order", (t) => {
  const etcd = settings('etcdv3', { etcd_endpoints: 'https://10.0.0.1:2379,https://10.0.0.2:2379' });
  t.true(isAgentDatastore({ datastore_type: 'etcdv3', etcd_endpoints: 'https://10.0.0.2:2379/, https://10.0.0.1:2379' }, etcd));
  t.false(isAgentDatastore({ datastore_type: 'etcdv3', etcd_endpoints: 'https://10.0.0.3:2379' }, etcd));
  t.false(isAgentDatastore({ datastore_type: 'kubernetes' }, etcd));
  t.false(isAgentDatastore({ datastore_type: 'etcdv3', etcd_discovery_srv: 'example.com' }, settings('etcdv3', {})));
  t.true(isAgentDatastore({ datastore_type: 'kubernetes' }, settings('kubernetes')));
  t.false(isAgentDatastore({ datastore_type: 'etcdv3' }, settings('kubernetes')));
});

test('IPAM turns: one at a time per node in arrival order, other nodes apart, a failure not blocking the next', async (t) => {
  const turns = nodeTurns();
  const events: string[] = [];
  let release!: () => void;
  const held = new Promise<void>((resolve) => (release = resolve));
  const first = turns('a', async (waited) => {
    events.push(`first waited=${waited}`);
    await held;
    events.push('first done');
    throw new Error('failed');
  });
  const second = turns('a', async (waited) => {
    events.push(`second waited=${waited}`);
    return 2;
  });
  const other = await turns('b', async (waited) => {
    events.push(`other waited=${waited}`);
    return 'b';
  });
  t.is(other, 'b', 'another node does not wait');
  t.deepEqual(events, ['first waited=false', 'other waited=false']);
  release();
  await t.throwsAsync(first, { message: 'failed' });
  t.is(await second, 2);
  t.deepEqual(events.slice(2), ['first done', 'second waited=true']);
});

test('the store pool lends the least busy connection; close() gives it back once', (t) => {
  const fake = (name: string) => ({ description: name, transactional: true, close: () => undefined }) as unknown as Store;
  const pool = new StorePool([fake('one'), fake('two')]);
  const a = pool.lend();
  const b = pool.lend();
  t.is(pool.lent, 2);
  t.is(a.description, 'one');
  t.is(b.description, 'two');
  a.close();
  a.close();
  t.is(pool.lent, 1);
  t.is(pool.lend().description, 'one');
});

test('a connection that sends a frame over the limit is closed; the server goes on serving', async (t) => {
  const socketPath = join(tempDir(t, 'cni-parts'), 'run', 'cni.sock');
  const stop = new AbortController();
  const server = await serveCni({
    socketPath,
    services: { via: 'netplug-node' },
    log: new Logger('test', () => undefined, process.pid),
    env: process.env,
    signal: stop.signal,
  });
  t.teardown(async () => {
    stop.abort();
    await server.stop();
  });
  await waitServing(socketPath);
  const closed = await new Promise<boolean>((resolve) => {
    const socket = connect(socketPath, () => socket.write(Buffer.from([0xff, 0xff, 0xff, 0xff])));
    socket.on('data', () => resolve(false));
    socket.on('close', () => resolve(true));
  });
  t.true(closed);
  const version = await callAgent(socketPath, { command: 'VERSION' });
  t.true(version.accepted);
  t.is(version.exitCode, 0);
  t.regex(version.stdout ?? '', /"supportedVersions"/);
});

test('an ADD the agent cannot journal is declined (the one-shot runs it); other commands are served', async (t) => {
  const dir = join(tempDir(t, 'cni-journal'), 'run');
  const socketPath = join(dir, 'cni.sock');
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'inflight'), 'not a directory');
  const stop = new AbortController();
  const server = await serveCni({
    socketPath,
    services: { via: 'netplug-node' },
    log: new Logger('test', () => undefined, process.pid),
    env: process.env,
    signal: stop.signal,
  });
  t.teardown(async () => {
    stop.abort();
    await server.stop();
  });
  await waitServing(socketPath);
  t.false((await callAgent(socketPath, { command: 'ADD', netconf: { cniVersion: '1.1.0', name: 'n', type: 'netplug' } })).accepted);
  t.is(server.counts.declined, 1);
  t.true((await callAgent(socketPath, { command: 'VERSION' })).accepted);
});
