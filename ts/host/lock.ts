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
 * (or at all): the lock only spares wasted work, so the caller goes on without it. A lock granted
 * after the caller stopped waiting is released at once.
 */
export async function lockHost(path: string, patienceMs: number): Promise<HostLock | undefined> {
  let gaveUp = false;
  const taken = addon()
    .lockHostFile(path)
    .then((outcome): HostLock | undefined => {
      if (outcome.fd === undefined || outcome.fd === null) return undefined;
      const fd = outcome.fd;
      if (gaveUp) {
        closeSync(fd);
        return undefined;
      }
      let held = true;
      return {
        waited: outcome.waited ?? true,
        release: () => {
          if (held) closeSync(fd);
          held = false;
        },
      };
    })
    .catch(() => undefined);
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<undefined>((resolve) => {
    timer = setTimeout(() => {
      gaveUp = true;
      resolve(undefined);
    }, patienceMs);
  });
  try {
    return await Promise.race([taken, timeout]);
  } finally {
    clearTimeout(timer);
  }
}
