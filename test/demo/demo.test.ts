// The README's main job, run as a user runs it: it succeeds, and leaves nothing behind (no
// namespace, no host interface, no etcd, no netplug-node nor its table, no port mapping, no scratch directory),
// also when interrupted.
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';

import test from 'ava';

import { requireBuilt } from '../helpers/cni.ts';
import { requireRoot } from '../helpers/kernel.ts';

const DEMO = new URL('../../scripts/demo.ts', import.meta.url).pathname;

/** What a demo run by `pid` could have left: namespaces, its etcd, netplug-node and its table, portmap's rules, its scratch directory. */
function leftovers(pid: number, output: string): string[] {
  const hostEnds = [...output.matchAll(/host end (\S+)/g)].map((m) => m[1] as string);
  const namespaces = spawnSync('ip', ['netns', 'list'], { encoding: 'utf8' })
    .stdout.split('\n')
    .filter((l) => l.startsWith('netplug-demo-') && l.includes(`-${pid}`));
  const links = hostEnds.filter((name) => spawnSync('ip', ['link', 'show', name]).status === 0);
  const etcd = spawnSync('pgrep', ['-af', 'netplug-demo-'], { encoding: 'utf8' })
    .stdout.split('\n')
    .filter((l) => l.includes('etcd'));
  const dirs = readdirSync(tmpdir()).filter((name) => name.startsWith('netplug-demo-'));
  const agent = /netplug-node runs .*\(pid (\d+)/.exec(output)?.[1];
  const agents = agent && existsSync(`/proc/${agent}`) ? [`netplug-node (pid ${agent})`] : [];
  const table =
    spawnSync('/usr/sbin/nft', ['list', 'table', 'inet', 'netplug'], { stdio: 'ignore' }).status === 0 ? ['table inet netplug'] : [];
  // portmap's rules for the demo's pods (its comments name each container), in the host's nat table.
  const nat = spawnSync('iptables-save', ['-t', 'nat'], { encoding: 'utf8' });
  const portmap = nat.stdout.split('\n').filter((line) => line.includes(`id: \\"demo-`) && line.includes(`-${pid}\\"`));
  return [...namespaces, ...links, ...etcd, ...dirs, ...agents, ...table, ...portmap];
}

// One demo at a time: each checks that no demo left anything.
test.serial('npm run demo: etcd, a pool, two pods through netplug and portmap, traffic, policy, DEL, and nothing left', (t) => {
  requireRoot();
  requireBuilt();
  const run = spawnSync(process.execPath, [DEMO], { encoding: 'utf8', timeout: 120_000 });
  t.is(run.status, 0, run.stderr);
  t.regex(run.stdout, /pool "demo-pool" created: 10\.123\.0\.0\/16/);
  t.regex(run.stdout, /pod a \(ADD through netplug, then portmap\): 10\.123\.\d+\.\d+\/32 on eth0/);
  t.regex(run.stdout, /pod a pings pod b .* through the host[\s\S]*2 received/);
  t.regex(run.stdout, /reaches pod b's port 8080 \(portmap\): "hello from pod b"/);
  t.regex(run.stdout, /demo-pool\s+10\.123\.0\.0\/16\s+65536\s+2\s+65534/, 'ipam show counts the two pods');
  // netplug-node enforces policy on the endpoints the ADDs wrote: both host ends dispatched,
  // a → b allowed, denied by the policy (explain names it), allowed again once it is deleted.
  const [hostA, hostB] = [...run.stdout.matchAll(/host end (\S+)/g)].map((m) => m[1] as string);
  const dispatch = /map to-wl \{[^}]*\}/.exec(run.stdout)?.[0] ?? '';
  t.deepEqual([...dispatch.matchAll(/"(\S+)" : goto/g)].map((m) => m[1]).sort(), [hostA, hostB].sort(), 'both host ends are dispatched');
  t.regex(
    run.stdout,
    /pod a connects to pod b's port 8080: "hello from pod b"[\s\S]*NetworkPolicy "default\/deny-a-to-b" created\n\npod a connects to pod b's port 8080: timed out \(dropped\)/,
  );
  t.regex(run.stdout, /ingress of default\/demo-b-\d+: denied by Deny rule 0 of NetworkPolicy default\/deny-a-to-b/);
  t.regex(
    run.stdout,
    /NetworkPolicy "default\/deny-a-to-b" deleted\n\npod a connects to pod b's port 8080 again: "hello from pod b"\n\nnetplug-node stopped/,
  );
  t.regex(run.stdout, /the pool is empty again\)\nPOOL.*\ndemo-pool\s+10\.123\.0\.0\/16\s+65536\s+0\s+65536/);
  t.regex(run.stdout, /nothing left behind/);
  t.deepEqual(leftovers(run.pid ?? 0, run.stdout), []);
});

const interrupted = test.macro(async (t, when: string) => {
  requireRoot();
  requireBuilt();
  const child = spawn(process.execPath, [DEMO], { stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  await new Promise<void>((resolve) => {
    child.stdout.on('data', (chunk: Buffer) => {
      output += chunk.toString();
      if (output.includes(when)) resolve();
    });
  });
  child.kill('SIGINT');
  t.is(await exited, 130);
  t.deepEqual(leftovers(child.pid ?? 0, output), []);
});

test.serial('an interrupted demo cleans up too: once both pods are wired', interrupted, 'pod b (');
test.serial('an interrupted demo cleans up too: while netplug-node enforces policy', interrupted, 'netplug-node runs');
