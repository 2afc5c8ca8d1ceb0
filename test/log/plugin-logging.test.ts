// What the built plugin logs: always to stderr, to the netconf's log file when it has one, at the
// netconf's level, and never a credential.
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

import test from 'ava';

import { hostLocalNetconf, invoke, tempDir } from '../helpers/cni.ts';
import { containerId, createNetns, uniqueSubnet4 } from '../helpers/kernel.ts';

test('DEBUG goes to stderr and the log file; credentials in the netconf never appear', (t) => {
  const netns = createNetns(t, 'log');
  const logDir = tempDir(t, 'log');
  const logFile = join(logDir, 'nested', 'cni.log');
  const netconf = hostLocalNetconf({
    version: '1.0.0',
    dataDir: tempDir(t, 'hl'),
    subnet: uniqueSubnet4(),
    extra: { log_level: 'debug', log_file_path: logFile, policy: { type: 'k8s', k8s_auth_token: 's3cr3t-t0ken' } },
  });
  // No K8S_POD_* arguments: this is about logging, not Kubernetes mode (which needs a reachable API).
  const call = { containerId: containerId(), netns: netns.path, netconf, args: 'IgnoreUnknown=1' };
  const add = invoke({ ...call, command: 'ADD' });
  t.is(add.status, 0, add.stdout);
  const del = invoke({ ...call, command: 'DEL' });
  t.is(del.status, 0);

  const file = readFileSync(logFile, 'utf8');
  for (const text of [file, add.stderr]) {
    t.regex(text, /\[DEBUG\]\[\d+\] netplug: ADD called /);
    t.regex(text, /\[INFO\]\[\d+\] netplug\/add: workload networked .*hostInterface="cali/);
    t.false(text.includes('s3cr3t-t0ken'));
  }
  t.regex(file, /\[INFO\]\[\d+\] netplug\/del: workload interface removed .*outcome="removed"/);
});

test('at ERROR a successful ADD logs nothing; a failure is logged', (t) => {
  const netns = createNetns(t, 'log');
  const logFile = join(tempDir(t, 'log'), 'cni.log');
  const netconf = hostLocalNetconf({
    version: '1.0.0',
    dataDir: tempDir(t, 'hl'),
    subnet: uniqueSubnet4(),
    extra: { log_level: 'ERROR', log_file_path: logFile },
  });
  const call = { containerId: containerId(), netns: netns.path, netconf };
  const add = invoke({ ...call, command: 'ADD' });
  t.is(add.status, 0);
  t.is(add.stderr, '');
  t.is(invoke({ ...call, command: 'ADD' }).status, 1);
  t.regex(
    readFileSync(logFile, 'utf8'),
    /^\S+ \[ERROR\]\[\d+\] netplug: ADD failed: interface "eth0" already exists .* code=101 via="one-shot"\n$/,
  );
  invoke({ ...call, command: 'DEL' });
});

test('a log file that cannot be written does not fail the pod', (t) => {
  const netns = createNetns(t, 'log');
  const netconf = hostLocalNetconf({
    version: '1.0.0',
    dataDir: tempDir(t, 'hl'),
    subnet: uniqueSubnet4(),
    extra: { log_file_path: '/proc/netplug-cannot/cni.log' },
  });
  const call = { containerId: containerId(), netns: netns.path, netconf };
  const add = invoke({ ...call, command: 'ADD' });
  t.is(add.status, 0, add.stdout);
  t.regex(add.stderr, /\[WARNING\].*log file disabled/);
  t.is(invoke({ ...call, command: 'DEL' }).status, 0);
});

test('a FIFO as log_file_path neither blocks nor fails ADD and DEL: stderr only, with a warning', (t) => {
  const netns = createNetns(t, 'log');
  const fifo = join(tempDir(t, 'log'), 'cni.log');
  execFileSync('mkfifo', [fifo]);
  const netconf = hostLocalNetconf({
    version: '1.0.0',
    dataDir: tempDir(t, 'hl'),
    subnet: uniqueSubnet4(),
    extra: { log_file_path: fifo },
  });
  const call = { containerId: containerId(), netns: netns.path, netconf };
  const add = invoke({ ...call, command: 'ADD' });
  t.is(add.status, 0, add.stdout + add.stderr);
  t.regex(add.stderr, /\[WARNING\].*log file disabled: .*cni\.log is not a regular file; logging to stderr only/);
  t.regex(add.stderr, /\[INFO\].*workload networked/, 'the records still reach stderr');
  const del = invoke({ ...call, command: 'DEL' });
  t.is(del.status, 0, del.stdout + del.stderr);
});
