// Which netplugctl runs are cluster commands (served by the agents bundle): the command's first
// word decides, after the global flags and their values; a name that happens to be a command word
// is a name. Checked on the built executable too: a pool named "upgrade" is created as a pool.
import test from 'ava';

import { commandStart, isClusterCommand, VALUED_GLOBAL_FLAGS } from '../../ts/ctl/cluster-command.ts';
import { DATASTORE_FLAGS } from '../../ts/ctl/datastore.ts';
import { startEtcd } from '../helpers/etcd.ts';
import { ctlOk } from '../helpers/ipam.ts';

test('the command starts after the global flags and their values', (t) => {
  t.is(commandStart(['--kubeconfig', 'upgrade', 'datastore', 'migrate', 'lock']), 2);
  t.is(commandStart(['-o', 'json', '--allow-version-mismatch', 'pool', 'list']), 3);
  t.is(commandStart(['--help']), -1);
  t.true(isClusterCommand(['--etcd-endpoints', 'http://127.0.0.1:2379', 'datastore', 'migrate', 'lock']));
  t.true(isClusterCommand(['upgrade', 'plan', '--manifest', 'netplug.yaml']));
  t.false(isClusterCommand(['pool', 'create', 'upgrade', '--cidr', '10.1.0.0/16']));
  t.false(isClusterCommand(['--kubeconfig', 'migrate', 'node', 'list']));
});

test('every datastore flag, and -o, is known to take a value before the command', (t) => {
  const named = Object.keys(DATASTORE_FLAGS).map((flag) => `--${flag}`);
  t.deepEqual([...VALUED_GLOBAL_FLAGS].sort(), [...named, '--output', '-o'].sort());
});

test('the built netplugctl creates a pool named "upgrade" as a pool, not an upgrade', async (t) => {
  const etcd = await startEtcd(t);
  t.regex(ctlOk(t, etcd, 'pool', 'create', 'upgrade', '--cidr', '10.91.0.0/16').stdout, /pool "upgrade" created/);
  t.regex(ctlOk(t, etcd, 'pool', 'get', 'upgrade').stdout, /10\.91\.0\.0\/16/);
});
