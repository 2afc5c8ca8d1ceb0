// Faults injected into a test's own etcd: found by its command line (its client URL is unique to
// the test), paused with SIGSTOP and resumed with SIGCONT, or killed and restarted on its data.
import { readdirSync, readFileSync } from 'node:fs';

import type { ExecutionContext } from 'ava';

import type { EtcdServer } from './etcd.ts';

/** The pid of the etcd serving `etcd` (this test's own: its client URL is on its command line). */
export function etcdPid(etcd: EtcdServer): number {
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const args = readFileSync(`/proc/${entry}/cmdline`, 'utf8').split('\0');
      if (args[0]?.endsWith('etcd') && args.includes(etcd.endpoints.split(',')[0] ?? '')) return Number(entry);
    } catch {
      // exited while we looked
    }
  }
  throw new Error(`no etcd process serves ${etcd.endpoints}`);
}

/** Stops etcd (SIGSTOP) for `ms`, then lets it go on; resumed at teardown whatever happens. */
export async function pauseEtcd(t: ExecutionContext, etcd: EtcdServer, ms: number): Promise<void> {
  const pid = etcdPid(etcd);
  const resume = () => {
    try {
      process.kill(pid, 'SIGCONT');
    } catch {
      // gone
    }
  };
  t.teardown(resume);
  process.kill(pid, 'SIGSTOP');
  await new Promise((resolve) => setTimeout(resolve, ms));
  resume();
}
