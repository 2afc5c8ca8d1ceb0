// npm test's TypeScript tests: the two groups of scripts/lib/test-groups.ts at once, the files
// that start Kubernetes clusters and the others, each group run whatever the other's outcome; exit 1
// if either failed. With arguments (`npm run test:ts -- test/ipam/`), one ava run over them.
//
// The others are one ava run, two files at a time. Each cluster file is an ava run of its own,
// longest first: two at a time while the others run (a third cluster beside them starved the
// machine's two cores, load above 60), three once they are done (two clusters alone left a fifth
// of the CPU idle, and the others' group ends minutes before the clusters').
//
// Node's compile cache (NODE_COMPILE_CACHE, kept beside the other build caches) spares each of the
// suite's thousands of Node processes that run TypeScript from source (ava's workers, fixtures)
// most of compiling it again: a fifth to two fifths of their CPU time.
//
// A CI log is often read from its end: after both groups, the run ends with each group's time and
// outcome, and for a group that failed, ava's own account of its failures again.
import { spawn } from 'node:child_process';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { stripVTControlCharacters } from 'node:util';

import { groups } from './lib/test-groups.ts';

const ROOT = new URL('../', import.meta.url).pathname;
const AVA = join(ROOT, 'node_modules/ava/entrypoints/cli.js');
/** The most lines of a failed group's account repeated at the end. */
const ACCOUNT_LINES = 250;
/** Cluster files at once while the others' group runs, and after it (see above). */
const CLUSTER_SLOTS = 2;
const CLUSTER_SLOTS_ALONE = 3;

const env = {
  ...process.env,
  NODE_COMPILE_CACHE: process.env['NODE_COMPILE_CACHE'] ?? join(homedir(), '.cache/netplug/node-compile-cache'),
};

interface GroupRun {
  group: string;
  status: number;
  minutes: number;
  /** ava's lines after the last test's: the failures' details and the counts. */
  account: string[];
  /** Lines that name a failure as it happened (✘, a timeout, a worker that died). */
  failures: string[];
}

const FAILURE_LINE = /^\s*✘|Timed out while running tests|exited due to|exited with a non-zero|Uncaught exception|Unhandled rejection/;

/**
 * One ava run. `prefix` names the file of a run of one file in its tests' lines (ava names it only
 * when a run has several): `✔ upgrade › helm › <title>`, as in a run of several.
 */
async function ava(args: string[], group?: 'others', prefix?: string): Promise<GroupRun> {
  const started = Date.now();
  const child = spawn(process.execPath, [AVA, ...args], {
    cwd: ROOT,
    stdio: ['ignore', 'pipe', 'inherit'],
    env: group ? { ...env, NETPLUG_TEST_GROUP: group } : env,
  });
  let lines: string[] = [];
  const failures: string[] = [];
  let partial = '';
  let testsSinceSeparator = false;
  child.stdout.on('data', (chunk: Buffer) => {
    const text = partial + chunk.toString('utf8');
    const split = text.split('\n');
    partial = split.pop() ?? '';
    // Whole lines only: the two groups share the terminal.
    const shown = prefix ? split.map((raw) => withPrefix(raw, prefix)) : split;
    if (shown.length > 0) process.stdout.write(`${shown.join('\n')}\n`);
    for (const raw of shown) {
      // ava colours its output on a terminal; the summary compares plain text.
      const line = stripVTControlCharacters(raw);
      // The account starts at the first separator after the last test's line (✔ or ✘).
      if (/^\s*[✔✘]/.test(line)) testsSinceSeparator = true;
      if (line.trim() === '─' && testsSinceSeparator) {
        lines = [];
        testsSinceSeparator = false;
      } else lines.push(line);
      if (lines.length > 4 * ACCOUNT_LINES) lines = lines.slice(-ACCOUNT_LINES);
      if (FAILURE_LINE.test(line)) failures.push(line.trim());
    }
  });
  const status = await new Promise<number>((resolve) => child.on('close', (code) => resolve(code ?? 1)));
  if (partial) {
    process.stdout.write(`${partial}\n`);
    lines.push(partial);
  }
  return { group: group ?? 'ava', status, minutes: (Date.now() - started) / 60_000, account: lines.slice(-ACCOUNT_LINES), failures };
}

const TEST_LINE = /^(\s*)([✔✘◌])((?: \[\w+\]:)?) /;

/** A test's line of a one-file run with the file's name, as ava gives it in a run of several. */
function withPrefix(raw: string, prefix: string): string {
  const line = stripVTControlCharacters(raw);
  return TEST_LINE.test(line) ? line.replace(TEST_LINE, `$1$2$3 ${prefix} › `) : raw;
}

/** `upgrade › tool-helm` for test/upgrade/tool-helm.test.ts. */
const prefixOf = (file: string) =>
  file
    .replace(/^test\//, '')
    .replace(/\.test\.ts$/, '')
    .replaceAll('/', ' › ');

/** The cluster files, each an ava run, CLUSTER_SLOTS at a time until `othersDone` settles, then CLUSTER_SLOTS_ALONE. */
async function clusterFiles(othersDone: Promise<unknown>): Promise<GroupRun> {
  const started = Date.now();
  let alone = false;
  const whenAlone = othersDone.then(() => {
    alone = true;
  });
  const queue = [...groups.clusters];
  const runs: GroupRun[] = [];
  const running = new Set<Promise<void>>();
  while (queue.length > 0 || running.size > 0) {
    while (queue.length > 0 && running.size < (alone ? CLUSTER_SLOTS_ALONE : CLUSTER_SLOTS)) {
      const file = queue.shift() as string;
      const run: Promise<void> = ava([file], undefined, prefixOf(file)).then((outcome) => {
        runs.push(outcome);
        running.delete(run);
      });
      running.add(run);
    }
    await Promise.race([...running, ...(alone ? [] : [whenAlone])]);
  }
  const failed = runs.filter((run) => run.status !== 0);
  return {
    group: 'clusters',
    status: failed.length > 0 ? 1 : 0,
    minutes: (Date.now() - started) / 60_000,
    account: failed.flatMap((run) => run.account).slice(-ACCOUNT_LINES),
    failures: failed.flatMap((run) => run.failures),
  };
}

function summarise(runs: GroupRun[]): void {
  const out: string[] = ['', '── npm test: the TypeScript tests ──'];
  for (const run of runs) {
    out.push(`${run.group}: ${run.minutes.toFixed(1)} min, ${run.status === 0 ? 'passed' : `failed (exit ${run.status})`}`);
  }
  for (const run of runs.filter((r) => r.status !== 0)) {
    out.push('', `${run.group} failed:`, ...run.failures.slice(0, 40).map((line) => `  ${line}`));
    out.push('', `${run.group}: ava's account of it, again:`, ...run.account);
  }
  process.stdout.write(`${out.join('\n')}\n`);
}

const args = process.argv.slice(2);
async function bothGroups(): Promise<GroupRun[]> {
  const others = ava([], 'others');
  return Promise.all([clusterFiles(others), others]);
}

const runs = args.length > 0 ? [await ava(args)] : await bothGroups();
summarise(runs);
process.exitCode = runs.some((run) => run.status !== 0) ? 1 : 0;
