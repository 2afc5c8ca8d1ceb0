// The whole CNI suite (test/plugin/) again, with netplug-node serving: the suite's files run in a
// child ava with NETPLUG_TEST_AGENT_SOCKET set, so every invocation's environment names this
// agent's socket (test/helpers/cni.ts, and cnitool's and podman's environments), and the `netplug`
// shim hands each command to the agent. They must all pass, and the agent must have served them.
// Left out, as they never run a plugin command a runtime would send:
// - host-lock.test.ts: the one-shot's host-wide flock, exercised in-process (the agent takes
//   turns in memory instead, and serves no command there);
// - executable.test.ts: the built executables in a mount namespace with no Node.js, each run
//   with a bare environment of its own (no socket): it is about the files, not the protocol.
import { spawn } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';

import test from 'ava';

import { spawnAgent } from '../helpers/agent-server.ts';
import { DIST_CNI, ROOT } from '../helpers/cni.ts';
import { startEtcd } from '../helpers/etcd.ts';
import { startKube } from '../helpers/kube.ts';
import { NODE_AGENT_RULES } from './agent.ts';

const LEFT_OUT = new Set(['host-lock.test.ts', 'executable.test.ts']);

test('the plugin suite passes with netplug-node serving every command', async (t) => {
  t.timeout(60 * 60_000);
  t.true(existsSync(join(DIST_CNI, 'netplug-oneshot')), 'dist/cni/netplug is the shim, beside netplug-oneshot (npm run build)');
  const [kube, etcd] = await Promise.all([startKube(t), startEtcd(t)]);
  const agent = await spawnAgent(t, {
    NODENAME: 'node-suite',
    DATASTORE_TYPE: 'etcdv3',
    ETCD_ENDPOINTS: etcd.endpoints,
    KUBECONFIG: (await kube.identityWith('netplug-node-suite', NODE_AGENT_RULES)).kubeconfig,
    NETPLUG_IPV4POOL_CIDR: '10.226.0.0/16',
    NETPLUG_NETWORKING_BACKEND: 'none',
  });
  const files = readdirSync(join(ROOT, 'test/plugin'))
    .filter((name) => name.endsWith('.test.ts') && !LEFT_OUT.has(name))
    .map((name) => `test/plugin/${name}`);
  t.log(`${files.length} files: ${files.join(' ')}`);

  const ava = spawn(process.execPath, [join(ROOT, 'node_modules/ava/entrypoints/cli.js'), ...files], {
    cwd: ROOT,
    env: { ...process.env, NETPLUG_TEST_AGENT_SOCKET: agent.socket },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  ava.stdout?.on('data', (chunk: Buffer) => (output += chunk));
  ava.stderr?.on('data', (chunk: Buffer) => (output += chunk));
  t.teardown(() => {
    if (ava.exitCode === null) ava.kill('SIGKILL');
  });
  const code = await new Promise<number | null>((resolve) => ava.once('exit', resolve));
  t.is(code, 0, output.slice(-20_000));
  const passed = /(\d+) tests? passed/.exec(output)?.[1];
  t.log(`the suite through the agent: ${passed} tests passed`);

  t.is(await agent.stop(), 0);
  const [, served, declined] = /stopped serving CNI: (\d+) commands served, (\d+) requests declined/.exec(agent.output()) ?? [];
  t.log(`netplug-node served ${served} commands and declined ${declined}`);
  // Declined: the commands whose namespace is gone or never was (the one-shot reports those alike).
  t.true(Number(served) > 150, `the agent served the suite's commands (${served})`);
  t.true(Number(declined) < Number(served) / 10, `few were declined (${declined})`);
});
