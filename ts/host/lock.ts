// The host-wide lock between plugin processes (flock(2) through the addon; the kernel releases it
// when a holder dies). Used where processes on one node would otherwise race one another for the
// same datastore object with no transaction to batch them.
import { closeSync } from 'node:fs';

import { addon } from '../native/addon.ts';

export interface HostLock {
  /** Whether another process held the lock first (what was read before may be stale). */
  waited: boolean;
  release(): void;
}

/**
 * Takes the lock at `path`, waiting up to `patienceMs`; undefined if it could not be had in time
 * (or at all): the lock only spares wasted work, so the caller goes on without it. The wait's
 * bound is the addon's: a holder that never lets go costs this process `patienceMs`, no more (its
 * waiting thread neither keeps the process alive nor keeps a lock granted after it gave up).
 */
export async function lockHost(path: string, patienceMs: number): Promise<HostLock | undefined> {
  const outcome = await addon()
    .lockHostFile(path, Math.max(0, Math.min(Math.floor(patienceMs), 2 ** 32 - 1)))
    .catch(() => undefined);
  if (outcome?.fd === undefined || outcome.fd === null) return undefined;
  const fd = outcome.fd;
  let held = true;
  return {
    waited: outcome.waited ?? true,
    release: () => {
      if (held) closeSync(fd);
      held = false;
    },
  };
}
