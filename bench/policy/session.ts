// What one run of bench/policy.ts holds for its whole length: the teardowns (everything started is
// stopped in reverse order, once, on success, failure or a signal), its scratch directory with its
// own copy of the built executables, and its progress log.
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';

import { IPAM_LOCK_FILE } from '../../ts/ipam/turns.ts';

const ROOT = new URL('../../', import.meta.url).pathname;
/** bench/policy-probe.ts, run in a network namespace by Probe. */
export const PROBE = join(ROOT, 'bench/policy-probe.ts');

const teardowns: (() => unknown)[] = [];
/** Where the run's parts (and test/helpers/nodes.ts) register what they started. */
export const collector = { teardown: (fn: () => unknown) => void teardowns.push(fn) };
let cleaned: Promise<void> | undefined;
export const cleanup = () =>
  (cleaned ??= (async () => {
    for (const fn of teardowns.reverse())
      try {
        await fn();
      } catch (err) {
        console.error(`cleanup: ${err instanceof Error ? err.message : err}`);
      }
  })());

export const scratch = mkdtempSync(join(tmpdir(), 'netplug-bench-policy-'));
collector.teardown(() => rmSync(scratch, { recursive: true, force: true }));
// The built executables, linked (or copied) at the start: a build elsewhere during the run
// replaces dist/ as a whole.
const DIST = join(scratch, 'dist');
export const NETPLUG_NODE = join(DIST, 'bin/netplug-node');
export const NETPLUG = join(DIST, 'cni/netplug');
export const CNI_PATH = `${join(DIST, 'cni')}:/usr/lib/cni`;

export const ms = (fromNs: bigint, toNs: bigint) => Number(toNs - fromNs) / 1e6;
export const log = (text: string) => console.error(`[bench:policy ${new Date().toISOString().slice(11, 19)}] ${text}`);

/** Checks the run can go (root, a build), copies the build, and has the IPAM lock and a signal cleaned up after. */
export function prepareRun(): void {
  if (process.getuid?.() !== 0) throw new Error('run as root: the bench makes network namespaces');
  for (const file of ['dist/cni/netplug', 'dist/bin/netplug-node'])
    if (!existsSync(join(ROOT, file))) throw new Error(`${file} is missing: run npm run build`);
  mkdirSync(DIST);
  for (const part of ['bin', 'cni'])
    if (spawnSync('cp', ['-al', join(ROOT, 'dist', part), DIST]).status !== 0) execFileSync('cp', ['-a', join(ROOT, 'dist', part), DIST]);
  // The ADDs take the host's IPAM lock file: it goes at the end if this run made it.
  const lockDirExisted = existsSync(join(IPAM_LOCK_FILE, '..'));
  const lockExisted = existsSync(IPAM_LOCK_FILE);
  collector.teardown(() => {
    if (!lockExisted) rmSync(IPAM_LOCK_FILE, { force: true });
    if (!lockDirExisted) rmSync(join(IPAM_LOCK_FILE, '..'), { recursive: true, force: true });
  });
  for (const signal of ['SIGINT', 'SIGTERM'] as const) process.once(signal, () => void cleanup().finally(() => process.exit(130)));
}

/** Runs `work` on every item, at most `limit` at a time. */
export async function parallel<T>(items: readonly T[], limit: number, work: (item: T, index: number) => Promise<unknown>): Promise<void> {
  let next = 0;
  const worker = async () => {
    for (let i = next++; i < items.length; i = next++) await work(items[i] as T, i);
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
}

/** Polls `check` every `intervalMs` until it is true; throws after `timeoutMs`. */
export async function until(what: string, check: () => boolean | Promise<boolean>, timeoutMs = 120_000, intervalMs = 100): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (
      await Promise.resolve()
        .then(check)
        .catch(() => false)
    )
      return;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(intervalMs);
  }
}
