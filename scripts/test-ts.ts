// npm test's TypeScript tests: ava over the two groups of ava.config.mjs, the files that start
// Kubernetes clusters, then the others, each group run whatever the other's outcome; exit 1 if
// either failed. With arguments (`npm run test:ts -- test/ipam/`), one ava run over them.
//
// Node's compile cache (NODE_COMPILE_CACHE, kept beside the other build caches) spares each of the
// suite's thousands of Node processes that run TypeScript from source (ava's workers, test agents,
// fixtures) most of compiling it again: a fifth to two fifths of their CPU time.
import { spawnSync } from 'node:child_process';
import { homedir } from 'node:os';
import { join } from 'node:path';

const ROOT = new URL('../', import.meta.url).pathname;
const AVA = join(ROOT, 'node_modules/ava/entrypoints/cli.js');

const env = {
  ...process.env,
  NODE_COMPILE_CACHE: process.env['NODE_COMPILE_CACHE'] ?? join(homedir(), '.cache/netplug/node-compile-cache'),
};

function ava(args: string[], group?: 'clusters' | 'others'): number {
  const outcome = spawnSync(process.execPath, [AVA, ...args], {
    cwd: ROOT,
    stdio: 'inherit',
    env: group ? { ...env, NETPLUG_TEST_GROUP: group } : env,
  });
  return outcome.status ?? 1;
}

const args = process.argv.slice(2);
if (args.length > 0) process.exitCode = ava(args);
else {
  const clusters = ava([], 'clusters');
  const others = ava([], 'others');
  process.exitCode = clusters || others;
}
