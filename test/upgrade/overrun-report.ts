// When an upgrade test overruns: it fails on its own, before ava's timeout ends the worker and
// with it every log line, and says where it was (the phase, the last netplugctl run's output) and
// what the cluster looked like (pods, the node agents' last lines, recent events). An upgrade
// that waits on something is then a failure that names it, not a silent timeout.
import type { ExecutionContext } from 'ava';

import type { Cluster } from '../helpers/cluster.ts';

/** Where a test is, for the report: its phase and, while netplugctl runs, what it has printed. */
export class Whereabouts {
  phase = 'starting';
  since = Date.now();
  output: (() => string) | undefined;
  /** Set when the test overran: the body stops at its next phase instead of going on after the failure. */
  overran = false;

  enter(phase: string, output?: () => string): void {
    if (this.overran) throw new Error(`stopped before "${phase}": the test overran in "${this.phase}"`);
    this.phase = phase;
    this.since = Date.now();
    this.output = output;
  }
}

/**
 * Runs `body`; if it has not ended after `limitMs`, rejects with the report instead. The body
 * stops at its next `where.enter` (what it awaits then is left to settle while the after hooks
 * stop the cluster).
 */
export async function withinLimit<T>(
  t: ExecutionContext,
  limitMs: number,
  cluster: () => Cluster,
  where: Whereabouts,
  body: () => Promise<T>,
): Promise<T> {
  t.timeout(limitMs + 90_000);
  let timer: NodeJS.Timeout | undefined;
  const overrun = new Promise<never>((_, reject) => {
    timer = setTimeout(async () => {
      where.overran = true;
      const seconds = Math.round((Date.now() - where.since) / 1000);
      const output = where.output?.().trim();
      const state = await clusterState(cluster()).catch((err) => `(the cluster's state could not be read: ${err})`);
      reject(
        new Error(
          `still running after ${Math.round(limitMs / 60_000)} min, ${seconds} s into: ${where.phase}` +
            `${output ? `\n--- its output so far:\n${output}` : ''}\n${state}`,
        ),
      );
    }, limitMs);
  });
  try {
    // Stopped by the overrun (at its next phase): the report, still being gathered, is the failure.
    const running = body().catch((err: unknown) => (where.overran ? overrun : Promise.reject(err)));
    return await Promise.race([running, overrun]);
  } finally {
    clearTimeout(timer);
  }
}

/** Pods, netplug's pods' last log lines (of those not ready), the last events. */
async function clusterState(cluster: Cluster): Promise<string> {
  const kubectl = (...args: string[]) =>
    cluster.kubectl('--request-timeout=20s', ...args).catch((err: Error) => `(kubectl ${args.join(' ')}: ${err.message})`);
  const parts = [`--- pods:\n${await kubectl('get', 'pods', '-A', '-o', 'wide')}`];
  const listed = await kubectl('get', 'pods', '-A', '-l', 'k8s-app in (netplug-node, netplug-kube-controllers)', '-o', 'json');
  const pods: any[] = listed.startsWith('{') ? JSON.parse(listed).items : [];
  for (const pod of pods) {
    const ready = pod.status?.containerStatuses?.every((status: any) => status.ready) ?? false;
    if (ready) continue;
    for (const container of [...(pod.spec.initContainers ?? []), ...pod.spec.containers]) {
      const lines = await kubectl('-n', pod.metadata.namespace, 'logs', pod.metadata.name, '-c', container.name, '--tail', '30');
      parts.push(`--- ${pod.metadata.name}/${container.name}, last lines:\n${lines}`);
    }
  }
  const events = (await kubectl('get', 'events', '-A', '--sort-by=.lastTimestamp')).trim().split('\n');
  parts.push(`--- events, the last 40:\n${events.slice(-40).join('\n')}`);
  return parts.join('\n');
}
