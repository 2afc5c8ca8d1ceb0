// The README's main job, run as a user runs it: it succeeds, and leaves nothing behind (no
// namespace, no host interface, no etcd, no scratch directory), also when interrupted.
import { spawn, spawnSync } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';

import test from 'ava';

import { requireBuilt } from '../helpers/cni.ts';
import { requireRoot } from '../helpers/kernel.ts';

const DEMO = new URL('../../scripts/demo.ts', import.meta.url).pathname;

/** What a demo run by `pid` could have left: namespaces, its etcd, its scratch directory. */
function leftovers(pid: number, hostEnds: string[]): string[] {
  const namespaces = spawnSync('ip', ['netns', 'list'], { encoding: 'utf8' })
    .stdout.split('\n')
    .filter((l) => l.startsWith('netplug-demo-') && l.includes(`-${pid}`));
  const links = hostEnds.filter((name) => spawnSync('ip', ['link', 'show', name]).status === 0);
  const etcd = spawnSync('pgrep', ['-af', 'netplug-demo-'], { encoding: 'utf8' })
    .stdout.split('\n')
    .filter((l) => l.includes('etcd'));
  const dirs = readdirSync(tmpdir()).filter((name) => name.startsWith('netplug-demo-'));
  return [...namespaces, ...links, ...etcd, ...dirs];
}

const hostEndsIn = (output: string) => [...output.matchAll(/host end (\S+)/g)].map((m) => m[1] as string);

// One demo at a time: each checks that no demo left anything.
test.serial('npm run demo: etcd, a pool, two pods through netplug and portmap, traffic, DEL, and nothing left', (t) => {
  requireRoot();
  requireBuilt();
  const run = spawnSync(process.execPath, [DEMO], { encoding: 'utf8', timeout: 120_000 });
  t.is(run.status, 0, run.stderr);
  t.regex(run.stdout, /pool "demo-pool" created: 10\.123\.0\.0\/16/);
  t.regex(run.stdout, /pod a \(ADD through netplug, then portmap\): 10\.123\.\d+\.\d+\/32 on eth0/);
  t.regex(run.stdout, /pod a pings pod b .* through the host[\s\S]*2 received/);
  t.regex(run.stdout, /reaches pod b's port 8080 \(portmap\): "hello from pod b"/);
  t.regex(run.stdout, /demo-pool\s+10\.123\.0\.0\/16\s+65536\s+2\s+65534/, 'ipam show counts the two pods');
  t.regex(run.stdout, /the pool is empty again\)\nPOOL.*\ndemo-pool\s+10\.123\.0\.0\/16\s+65536\s+0\s+65536/);
  t.regex(run.stdout, /nothing left behind/);
  t.deepEqual(leftovers(run.pid ?? 0, hostEndsIn(run.stdout)), []);
});

test.serial('an interrupted demo cleans up too', async (t) => {
  requireRoot();
  requireBuilt();
  const child = spawn(process.execPath, [DEMO], { stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  await new Promise<void>((resolve) => {
    child.stdout.on('data', (chunk: Buffer) => {
      output += chunk.toString();
      if (output.includes('pod b (')) resolve(); // both pods are wired
    });
  });
  child.kill('SIGINT');
  t.is(await exited, 130);
  t.deepEqual(leftovers(child.pid ?? 0, hostEndsIn(output)), []);
});
