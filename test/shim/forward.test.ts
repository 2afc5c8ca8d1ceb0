// The built shim, dist/cni/netplug, against a socket that speaks its protocol: what it forwards,
// what it returns, and when it gives the call to the one-shot plugin instead. Every test runs the
// executable as a runtime does; the one-shot plugin beside it is the real one (the SEA).
import { join } from 'node:path';

import test from 'ava';

import { DIST_CNI, NETPLUG, requireBuilt } from '../helpers/cni.ts';
import { logWithoutTimeAndPid, run, startProtocolAgent } from './protocol-agent.ts';

const ONESHOT = join(DIST_CNI, 'netplug-oneshot');
const MAX_FRAME = 16 * 1024 * 1024;

const cniEnv = (socket: string, command: string, extra: Record<string, string> = {}): Record<string, string> => ({
  PATH: '/usr/sbin:/usr/bin:/sbin:/bin',
  CNI_COMMAND: command,
  CNI_CONTAINERID: 'c0ffee',
  CNI_NETNS: '/var/run/netns/shim-test',
  CNI_IFNAME: 'eth0',
  CNI_PATH: `${DIST_CNI}:/usr/lib/cni`,
  NETPLUG_AGENT_SOCKET: socket,
  // Generous: this machine may be busy, and only the bound's own test is about the bound.
  NETPLUG_AGENT_ACCEPT_TIMEOUT_MS: '30000',
  ...extra,
});

test.before(() => requireBuilt());

test('a served call: the environment and stdin arrive byte-exact, the answer returns unchanged', async (t) => {
  const stdout = Buffer.from([0x7b, 0x00, 0xff, 0x0a, 0xe2, 0x9c]);
  const stderr = Buffer.from('a log line, é\n\u0000second\n');
  const agent = await startProtocolAgent(t, () => ({ kind: 'serve', exitCode: 7, stdout, stderr }));
  const env = cniEnv(agent.socket, 'ADD', { ODD: 'a=b\n"q" \\ é ✓ \u0001', EMPTY: '' });
  const stdin = Buffer.concat([Buffer.from('{"cniVersion":"1.0.0"}'), Buffer.from([0x00, 0xff, 0xfe])]);

  const shim = await run(NETPLUG, env, stdin);
  t.is(shim.status, 7);
  t.true(shim.stdout.equals(stdout), shim.stdout.toString('hex'));
  t.true(shim.stderr.equals(stderr), shim.stderr.toString('hex'));
  const [call] = await agent.settled();
  t.deepEqual(call?.request, { version: 1, program: 'netplug', pid: shim.pid, env });
  t.true(call?.stdin.equals(stdin));
  t.true(call?.go);
  t.is(call?.extra.length, 0, 'nothing after go');
});

test('exit code 0 and empty output pass through as well', async (t) => {
  const agent = await startProtocolAgent(t, () => ({ kind: 'serve', exitCode: 0, stdout: '', stderr: '' }));
  const shim = await run(NETPLUG, cniEnv(agent.socket, 'DEL'), '{}');
  t.deepEqual([shim.status, shim.stdout.length, shim.stderr.length], [0, 0, 0]);
});

test('VERSION and a call without a command leave stdin unread: the second frame is empty', async (t) => {
  const agent = await startProtocolAgent(t, () => ({ kind: 'serve', exitCode: 0, stdout: 'v', stderr: '' }));
  await run(NETPLUG, cniEnv(agent.socket, 'VERSION'), '{"cniVersion":"1.0.0"}');
  const { CNI_COMMAND: _, ...noCommand } = cniEnv(agent.socket, '');
  await run(NETPLUG, noCommand, 'stdin nobody reads');
  const calls = await agent.settled();
  t.deepEqual(
    calls.map((call) => [call.request.env['CNI_COMMAND'], call.stdin.length]),
    [
      ['VERSION', 0],
      [undefined, 0],
    ],
  );
});

test('concurrent shims each get their own answer', async (t) => {
  const agent = await startProtocolAgent(t, (request) => ({
    kind: 'serve',
    exitCode: 0,
    stdout: `for ${request.env['CNI_CONTAINERID']}`,
    stderr: '',
  }));
  const ids = Array.from({ length: 24 }, (_, i) => `pod-${i}`);
  const runs = await Promise.all(ids.map((id) => run(NETPLUG, cniEnv(agent.socket, 'ADD', { CNI_CONTAINERID: id }), `{"n":"${id}"}`)));
  t.deepEqual(
    runs.map((shim) => shim.stdout.toString()),
    ids.map((id) => `for ${id}`),
  );
  const calls = await agent.settled();
  t.deepEqual(
    calls.map((call) => `${call.request.env['CNI_CONTAINERID']} ${call.stdin}`).sort(),
    ids.map((id) => `${id} {"n":"${id}"}`).sort(),
  );
});

test('a decline runs the one-shot plugin, which answers as it does when run itself', async (t) => {
  const agent = await startProtocolAgent(t, () => ({ kind: 'decline' }));
  const env = cniEnv(agent.socket, 'ADD');
  const badNetconf = '{"cniVersion":"0.4.0","name":"n","type":"netplug",';
  const [shim, direct] = [await run(NETPLUG, env, badNetconf), await run(ONESHOT, env, badNetconf)];
  t.is(shim.status, 1);
  t.like(JSON.parse(shim.stdout.toString()), { code: 6 });
  t.deepEqual([shim.status, shim.stdout.toString()], [direct.status, direct.stdout.toString()]);
  t.is(logWithoutTimeAndPid(shim.stderr), logWithoutTimeAndPid(direct.stderr));
  t.regex(shim.stderr.toString(), /netplug: ADD failed: .* via="one-shot"/);
  const [call] = await agent.settled();
  t.false(call?.go, 'no go after a decline');
});

test('an agent that does not accept within the bound: the one-shot plugin runs, and the agent never gets go', async (t) => {
  const agent = await startProtocolAgent(t, () => ({ kind: 'silent' }));
  const env = cniEnv(agent.socket, 'VERSION', { NETPLUG_AGENT_ACCEPT_TIMEOUT_MS: '300' });
  const [shim, direct] = [await run(NETPLUG, env), await run(ONESHOT, env)];
  t.is(shim.status, 0);
  t.is(JSON.parse(shim.stdout.toString()).cniVersion, '1.1.0');
  t.deepEqual(
    [shim.status, shim.stdout.toString(), shim.stderr.toString()],
    [direct.status, direct.stdout.toString(), direct.stderr.toString()],
  );
  const [call] = await agent.settled();
  t.false(call?.go);
  t.is(call?.extra.length, 0, 'the connection closed with nothing after the request');
});

test('the connection lost after go during ADD: error 11 naming netplug-node and the socket, in the netconf version', async (t) => {
  const agent = await startProtocolAgent(t, () => ({ kind: 'hang-up-after-go' }));
  const shim = await run(NETPLUG, cniEnv(agent.socket, 'ADD'), '{"cniVersion":"0.4.0","name":"n","type":"netplug"}');
  t.is(shim.status, 1);
  t.is(shim.stderr.length, 0);
  const error = JSON.parse(shim.stdout.toString());
  t.deepEqual(Object.keys(error), ['cniVersion', 'code', 'msg']);
  t.is(error.cniVersion, '0.4.0');
  t.is(error.code, 11);
  t.is(
    error.msg,
    `netplug-node's connection on ${agent.socket} ended during ADD (netplug-node closed the connection before its whole answer); try again later`,
  );
  t.true(shim.stdout.toString().startsWith('{\n    "cniVersion": "0.4.0",\n    "code": 11,\n'), 'printed as the plugin prints');
  const unparsable = await run(NETPLUG, cniEnv(agent.socket, 'ADD'), '{"cniVersion":');
  t.like(JSON.parse(unparsable.stdout.toString()), { cniVersion: '1.1.0', code: 11 });
  t.true((await agent.settled()).every((call) => call.go));
});

test('the connection lost after go during DEL: the one-shot plugin runs it, with the same stdin', async (t) => {
  const agent = await startProtocolAgent(t, () => ({ kind: 'hang-up-after-go' }));
  const env = cniEnv(agent.socket, 'DEL');
  // Fails validation in the plugin: its error, echoing the netconf's value, proves it read stdin.
  const netconf = JSON.stringify({ cniVersion: '1.0.0', name: 'shim-del', type: 'netplug', mtu: 'jumbo' });
  const [shim, direct] = [await run(NETPLUG, env, netconf), await run(ONESHOT, env, netconf)];
  t.is(shim.status, 1);
  t.regex(shim.stdout.toString(), /mtu/);
  t.deepEqual([shim.status, shim.stdout.toString()], [direct.status, direct.stdout.toString()]);
  t.is(logWithoutTimeAndPid(shim.stderr), logWithoutTimeAndPid(direct.stderr));
  const [call] = await agent.settled();
  t.true(call?.go);
  t.is(call?.stdin.toString(), netconf);
});

test('stdin above 16 MiB is error 7 naming its size, forwarded nowhere; 16 MiB itself is forwarded', async (t) => {
  const agent = await startProtocolAgent(t, () => ({ kind: 'serve', exitCode: 0, stdout: 'ok', stderr: '' }));
  const over = await run(NETPLUG, cniEnv(agent.socket, 'ADD'), Buffer.alloc(MAX_FRAME + 10, 0x20));
  t.is(over.status, 1);
  t.deepEqual(JSON.parse(over.stdout.toString()), {
    cniVersion: '1.1.0',
    code: 7,
    msg: `the network configuration on stdin is ${MAX_FRAME + 10} bytes, more than the ${MAX_FRAME} (16 MiB) netplug accepts`,
  });
  t.is(agent.connections(), 0);
  const limit = await run(NETPLUG, cniEnv(agent.socket, 'ADD'), Buffer.alloc(MAX_FRAME, 0x20));
  t.deepEqual([limit.status, limit.stdout.toString()], [0, 'ok']);
  const [call] = await agent.settled();
  t.is(call?.stdin.length, MAX_FRAME);
});

test('an accept timeout that is not a number is error 4 naming it', async (t) => {
  const agent = await startProtocolAgent(t, () => ({ kind: 'decline' }));
  const shim = await run(NETPLUG, cniEnv(agent.socket, 'ADD', { NETPLUG_AGENT_ACCEPT_TIMEOUT_MS: '1s' }), '{}');
  t.is(shim.status, 1);
  t.deepEqual(JSON.parse(shim.stdout.toString()), {
    cniVersion: '1.1.0',
    code: 4,
    msg: 'NETPLUG_AGENT_ACCEPT_TIMEOUT_MS is "1s"; it must be a whole number of milliseconds',
  });
  t.is(agent.connections(), 0);
});
