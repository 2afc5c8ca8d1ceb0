// The policy setup wait through the built executable, in Kubernetes mode (pod names in CNI_ARGS;
// nothing is read from the API without policy.type k8s): the policy agent's status file written
// 300 ms into the ADD ends the wait (no timeout is logged), also when its directory appears only
// then; a file never written lets ADD succeed at the timeout, saying so; negative is an error.
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

import test, { type ExecutionContext } from 'ava';

import { MAX_TIMER_MS, setLongTimeout } from '../../ts/plugin/policy-wait.ts';
import { hostLocalNetconf, tempDir } from '../helpers/cni.ts';
import { invokeAsync } from '../helpers/ipam.ts';
import { containerId, createNetns, link, uniqueSubnet4 } from '../helpers/kernel.ts';
import { podArgs } from '../helpers/kube.ts';

const TIMED_OUT = /did not report the pod's policy programmed within \d+ s \(no .*\); networking it anyway/;

/** ADD for `pod` (one per test: the host interface is named after it) on a subnet of its own. */
function waitingAdd(t: ExecutionContext, statusDir: string, timeoutSeconds: number, pod: { namespace: string; name: string }) {
  const netconf = hostLocalNetconf({
    version: '1.0.0',
    dataDir: tempDir(t, 'pw'),
    subnet: uniqueSubnet4(),
    extra: { policy_setup_timeout_seconds: timeoutSeconds, endpoint_status_dir: statusDir },
  });
  const netns = createNetns(t, 'pw');
  const id = containerId();
  const call = { containerId: id, netns: netns.path, netconf, args: podArgs(pod, id) };
  t.teardown(() => invokeAsync({ ...call, command: 'DEL' }));
  return { outcome: invokeAsync({ ...call, command: 'ADD' }), netns };
}

/** Writes `file` in `dir` (made if missing) after `ms`, as the policy agent would. */
function writeLater(t: ExecutionContext, dir: string, file: string, ms: number) {
  const timer = setTimeout(() => {
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, file), JSON.stringify({ ifaceName: 'eth0' }));
  }, ms);
  t.teardown(() => clearTimeout(timer));
}

test('the status file written after 300 ms ends the wait: ADD succeeds without a timeout', async (t) => {
  const dir = tempDir(t, 'status');
  writeLater(t, dir, 'k8s shop%2Fcart-0 eth0', 300);
  const { outcome, netns } = waitingAdd(t, dir, 30, { namespace: 'shop', name: 'cart-0' });
  const add = await outcome;
  t.is(add.status, 0, add.stdout + add.stderr);
  t.notRegex(add.stderr, TIMED_OUT);
  t.truthy(link('eth0', netns));
});

test('a status directory that appears only with the file: the stat poll sees it', async (t) => {
  const dir = join(tempDir(t, 'status'), 'endpoint-status');
  writeLater(t, dir, 'k8s shop%2Fcart-1 eth0', 300);
  const add = await waitingAdd(t, dir, 30, { namespace: 'shop', name: 'cart-1' }).outcome;
  t.is(add.status, 0, add.stdout + add.stderr);
  t.notRegex(add.stderr, TIMED_OUT);
});

test('the file name escapes namespace/pod as the policy agent does', async (t) => {
  const dir = tempDir(t, 'status');
  writeLater(t, dir, 'k8s team%2Bone%2Fweb.v2~0 eth0', 300);
  const add = await waitingAdd(t, dir, 30, { namespace: 'team+one', name: 'web.v2~0' }).outcome;
  t.is(add.status, 0, add.stdout + add.stderr);
  t.notRegex(add.stderr, TIMED_OUT);
});

test('a status file never written: ADD succeeds at the timeout and logs it', async (t) => {
  const dir = tempDir(t, 'status');
  writeLater(t, dir, 'k8s shop%2Fother-pod eth0', 100);
  const { outcome, netns } = waitingAdd(t, dir, 1, { namespace: 'shop', name: 'cart-2' });
  const add = await outcome;
  t.is(add.status, 0, add.stdout + add.stderr);
  t.regex(add.stderr, TIMED_OUT);
  t.true(add.stderr.includes(join(dir, 'k8s shop%2Fcart-2 eth0')), 'the log names the file waited for');
  t.truthy(link('eth0', netns), 'the pod is networked all the same');
});

test('a negative policy_setup_timeout_seconds is a configuration error', async (t) => {
  const add = await waitingAdd(t, tempDir(t, 'status'), -1, { namespace: 'shop', name: 'cart-3' }).outcome;
  t.is(add.json?.code, 7, add.stdout);
  t.regex(add.json.msg, /policy_setup_timeout_seconds.*-1/);
});

test('a timer longer than setTimeout can hold neither fires at once nor early: it is chained', async (t) => {
  let fired = false;
  const timer = setLongTimeout(() => {
    fired = true;
  }, MAX_TIMER_MS + 10_000);
  t.teardown(() => timer.clear());
  await new Promise((resolve) => setTimeout(resolve, 200));
  t.false(fired, 'a single setTimeout of this length would have fired after 1 ms');
  timer.clear();
  const short = await new Promise<boolean>((resolve) => setLongTimeout(() => resolve(true), 5));
  t.true(short);
});

test('a policy_setup_timeout_seconds of 2,147,484 s or more waits for the status file', async (t) => {
  const dir = tempDir(t, 'status');
  writeLater(t, dir, 'k8s shop%2Fcart-4 eth0', 1000);
  const add = await waitingAdd(t, dir, 2_147_484, { namespace: 'shop', name: 'cart-4' }).outcome;
  t.is(add.status, 0, add.stdout + add.stderr);
  t.notRegex(add.stderr, TIMED_OUT, 'it waited: the file, not an overflowed timer, ended the wait');
});
