// The README's main job, run as a user runs it: it succeeds, and leaves nothing behind, also
// when interrupted.
import { spawn, spawnSync } from 'node:child_process';

import test from 'ava';

import { requireRoot } from '../helpers/kernel.ts';

const DEMO = new URL('../../scripts/demo.ts', import.meta.url).pathname;

function leftovers(pid: number): string {
  const names = spawnSync('ip', ['netns', 'list'], { encoding: 'utf8' }).stdout;
  const links = spawnSync('ip', ['-o', 'link'], { encoding: 'utf8' }).stdout;
  return [...names.split('\n').filter((l) => l.includes(`netplug-demo-`) && l.includes(String(pid))),
    ...links.split('\n').filter((l) => l.includes(`npdemo`) && l.includes(String(pid % 10000)))].join('\n');
}

test('npm run demo wires two pods, pings across, and removes everything', (t) => {
  requireRoot();
  const run = spawnSync(process.execPath, [DEMO], { encoding: 'utf8' });
  t.is(run.status, 0, run.stderr);
  t.regex(run.stdout, /pod a pings pod b .* through the host[\s\S]*2 received/);
  t.regex(run.stdout, /check pod a: kernel state matches the request/);
  t.regex(run.stdout, /no namespaces or links left behind/);
  t.is(leftovers(run.pid ?? 0), '');
});

test('an interrupted demo cleans up too', async (t) => {
  requireRoot();
  const child = spawn(process.execPath, [DEMO], { stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  await new Promise<void>((resolve) => {
    child.stdout.on('data', (chunk: Buffer) => {
      output += chunk.toString();
      if (output.includes('pod b:')) resolve(); // both pods are wired
    });
  });
  child.kill('SIGINT');
  t.is(await exited, 130);
  t.is(leftovers(child.pid ?? 0), '');
});
