// The conflist on the host: written atomically with mode 0600, and only when its text changes (a
// runtime watching the conf dir sees no needless event); the old name removed.
import { chmod, readFile, rm } from 'node:fs/promises';
import { join } from 'node:path';

import type { Log } from '../runtime/log.ts';
import type { InstallSettings } from './settings.ts';
import { writeFileAtomically } from './write-atomically.ts';

/** Whether the file changed. */
export async function writeConflist(settings: InstallSettings, text: string, source: string, log: Log): Promise<boolean> {
  const target = join(settings.confDir, settings.confName);
  const current = await readFile(target, 'utf8').catch(() => undefined);
  if (current === text) {
    await chmod(target, 0o600);
  } else {
    await writeFileAtomically(target, text, 0o600);
    log.info(`wrote ${join(settings.hostNetDir, settings.confName)} from ${source}`);
  }
  if (settings.oldConfName && settings.oldConfName !== settings.confName) {
    await rm(join(settings.confDir, settings.oldConfName), { force: true });
  }
  return current !== text;
}
