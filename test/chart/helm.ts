// The helm the chart tests drive (scripts/helm.sh builds it once from the Go module proxy), with
// its state (cache, configuration, repositories) in the test's temp dir, never the user's.
import { execFile, execFileSync } from 'node:child_process';
import { promisify } from 'node:util';
import { join } from 'node:path';

import type { ExecutionContext } from 'ava';

import { ROOT, tempDir } from '../helpers/cni.ts';

export const CHART_PATH = join(ROOT, 'charts/netplug-operator');

/** Runs helm without blocking the event loop (a test may serve its chart repository in-process). */
export type Helm = (...args: string[]) => Promise<string>;

const run = promisify(execFile);

export function helmBinary(): string {
  return execFileSync('sh', [join(ROOT, 'scripts/helm.sh')], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] }).trim();
}

/** Runs helm with its own homes under a temp dir (and `kubeconfig`, if given); resolves to its standard output. */
export function isolatedHelm(t: Pick<ExecutionContext, 'teardown'>, kubeconfig?: string): Helm {
  const binary = helmBinary();
  const home = tempDir(t, 'helm');
  const env: Record<string, string> = {
    PATH: process.env['PATH'] ?? '/usr/bin:/bin',
    HOME: home,
    HELM_CACHE_HOME: join(home, 'cache'),
    HELM_CONFIG_HOME: join(home, 'config'),
    HELM_DATA_HOME: join(home, 'data'),
    KUBECONFIG: kubeconfig ?? join(home, 'no-cluster.kubeconfig'),
  };
  return async (...args) => (await run(binary, args, { env, encoding: 'utf8' })).stdout;
}
