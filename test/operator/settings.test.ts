// netplug-operator's settings (ts/operator/settings.ts): the defaults, the manifest's environment,
// and a bad value refused at start with one line naming the variable and its value.
import test from 'ava';

import { runOperatorMain } from '../../ts/operator/main.ts';
import { operatorSettings } from '../../ts/operator/settings.ts';
import { STANDARD_NODE_LAYOUT } from '../../ts/render/objects.ts';
import { NETPLUG_VERSION } from '../../ts/version.ts';

test('defaults: the release image, the standard node layout, 0.0.0.0:9095, leader election on Lease netplug-operator', (t) => {
  const settings = operatorSettings({ OPERATOR_NAMESPACE: 'ops', POD_NAME: 'netplug-operator-abc' });
  t.is(settings.image, `localhost/netplug:${NETPLUG_VERSION}`);
  t.deepEqual(settings.node, STANDARD_NODE_LAYOUT);
  t.deepEqual(settings.health, { host: '0.0.0.0', port: 9095 });
  t.like(settings.leaderElection, { namespace: 'ops', name: 'netplug-operator', leaseDurationMs: 15_000, renewDeadlineMs: 10_000 });
  t.regex(settings.leaderElection?.identity ?? '', /^netplug-operator-abc_/);
  t.is(operatorSettings({ LEADER_ELECTION: 'false' }).leaderElection, undefined);
  t.is(operatorSettings({ OPERATOR_NAMESPACE: 'ops', LEADER_ELECTION_NAMESPACE: 'elsewhere' }).leaderElection?.namespace, 'elsewhere');
});

test('bad settings: exit 1 with one line naming the variable and its value; an argument: exit 2 with the usage', async (t) => {
  for (const [env, message] of [
    [{ NETPLUG_OPERATOR_HEALTH_ADDR: 'localhost' }, /NETPLUG_OPERATOR_HEALTH_ADDR "localhost" must be host:port/],
    [{ NETPLUG_NODE_STATE_DIR: 'var/lib/netplug' }, /NETPLUG_NODE_STATE_DIR "var\/lib\/netplug" must be an absolute host path/],
    [{ LEADER_ELECTION: 'yes' }, /LEADER_ELECTION "yes" must be true or false/],
    [{ LEADER_ELECTION_LEASE_DURATION: '2s' }, /LEADER_ELECTION_RETRY_PERIOD .* must each be shorter than the next/],
    [{ LOG_LEVEL: 'loud' }, /LOG_LEVEL "loud"/],
  ] as const) {
    const lines: string[] = [];
    const code = await runOperatorMain([], { KUBECONFIG: '/nonexistent', ...env }, new AbortController().signal, {
      writeLog: (line) => lines.push(line),
    });
    t.is(code, 1);
    t.is(lines.length, 1, lines.join(''));
    t.regex(lines[0] ?? '', / ERROR cannot start: /);
    t.regex(lines[0] ?? '', message);
  }
  const lines: string[] = [];
  t.is(await runOperatorMain(['--now'], {}, new AbortController().signal, { writeLog: (line) => lines.push(line) }), 2);
  t.regex(lines.join(''), /ERROR unexpected argument "--now"; usage: netplug-operator/);
});
