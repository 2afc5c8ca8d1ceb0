// The CNI service's hook for other subsystems (ts/node/cni/answer-hooks.ts): called once an ADD has
// succeeded and before it answers, with the ADD's result; it may replace the result, and its
// failure fails the ADD. Through the real server (in-process, on a socket in a temporary
// directory) with a real netplug-ipam ADD on a real etcd, and on its own.
import { join } from 'node:path';

import test from 'ava';

import { answerOf, type AnsweringAdd } from '../../ts/node/cni/answer-hooks.ts';
import { serveCni } from '../../ts/node/cni/serve-cni.ts';
import { Logger } from '../../ts/log/logger.ts';
import { callAgent, waitServing } from '../helpers/agent-client.ts';
import { tempDir } from '../helpers/cni.ts';
import { startEtcd } from '../helpers/etcd.ts';
import { ctlOk, ipamNetconf } from '../helpers/ipam.ts';
import { containerId, createNetns } from '../helpers/kernel.ts';

const added = (exitCode = 0): AnsweringAdd => ({
  program: 'netplug',
  env: { CNI_COMMAND: 'ADD' },
  stdin: Buffer.from('{}'),
  outcome: { stdout: '{"cniVersion":"1.1.0"}\n', exitCode },
});

test('the hook sees a successful ADD only; it may keep or replace the result, and its failure fails the ADD naming why', async (t) => {
  const seen: string[] = [];
  const hooks = {
    beforeAddAnswers: async (add: AnsweringAdd) => {
      seen.push(add.outcome.stdout);
      return undefined;
    },
  };
  t.deepEqual(await answerOf(hooks, 'ADD', added()), added().outcome);
  t.deepEqual(await answerOf(hooks, 'ADD', added(1)), added(1).outcome, 'a failed ADD answers as it is');
  t.deepEqual(await answerOf(hooks, 'DEL', added()), added().outcome, 'not a DEL');
  t.deepEqual(await answerOf({}, 'ADD', added()), added().outcome, 'no hook');
  t.is(seen.length, 1);
  const replaced = { stdout: 'replaced', exitCode: 0 };
  t.deepEqual(await answerOf({ beforeAddAnswers: async () => replaced }, 'ADD', added()), replaced);
  const failed = await answerOf({ beforeAddAnswers: () => Promise.reject(new Error('policy not programmed')) }, 'ADD', added());
  t.is(failed.exitCode, 1);
  t.like(JSON.parse(failed.stdout), { code: 999, msg: 'the ADD succeeded, but netplug-node could not finish it: policy not programmed' });
});

test('the CNI server calls the hook with the ADD it served, before answering; a failing hook fails the ADD', async (t) => {
  const etcd = await startEtcd(t);
  ctlOk(t, etcd, 'pool', 'create', 'hooks', '--cidr', '10.231.0.0/24', '--block-size', '28');
  const socketPath = join(tempDir(t, 'cni-hooks'), 'run', 'cni.sock');
  const stop = new AbortController();
  const calls: AnsweringAdd[] = [];
  let fail = false;
  const server = await serveCni({
    socketPath,
    services: { via: 'netplug-node' },
    log: new Logger('test', () => undefined, process.pid),
    env: process.env,
    signal: stop.signal,
    hooks: {
      beforeAddAnswers: async (add) => {
        calls.push(add);
        if (fail) throw new Error('policy not programmed');
        return undefined;
      },
    },
  });
  t.teardown(async () => {
    stop.abort();
    await server.stop();
  });
  await waitServing(socketPath);
  const netconf = ipamNetconf(etcd, { node: 'node-hooks' });
  const netns = createNetns(t, 'hooks').path;
  const id = containerId();
  const add = await callAgent(socketPath, { command: 'ADD', containerId: id, netns, netconf }, { program: 'netplug-ipam' });
  t.true(add.accepted);
  t.is(add.exitCode, 0, add.stdout);
  t.is(calls.length, 1);
  t.is(calls[0]?.program, 'netplug-ipam');
  t.is(calls[0]?.env['CNI_CONTAINERID'], id);
  t.deepEqual(JSON.parse(calls[0]?.outcome.stdout ?? ''), add.json, 'the hook saw the result the runtime got');

  fail = true;
  const second = containerId();
  const refused = await callAgent(socketPath, { command: 'ADD', containerId: second, netns, netconf }, { program: 'netplug-ipam' });
  t.is(refused.exitCode, 1);
  t.like(refused.json, { code: 999, msg: 'the ADD succeeded, but netplug-node could not finish it: policy not programmed' });
  for (const container of [id, second]) {
    const del = await callAgent(socketPath, { command: 'DEL', containerId: container, netns, netconf }, { program: 'netplug-ipam' });
    t.is(del.exitCode, 0, del.stdout);
  }
  t.is(calls.length, 2, 'DELs are not hooked');
});
