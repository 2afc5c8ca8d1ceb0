// `netplug-install --check`, the install-cni container's readiness probe: ready once this version's
// install is complete (the record says this version, and the conflist exists).
import { access } from 'node:fs/promises';
import { join } from 'node:path';

import { NETPLUG_VERSION } from '../version.ts';
import { readRecord } from './record.ts';
import type { InstallSettings } from './settings.ts';

/** Undefined when installed; else why not. */
export async function whyNotInstalled(settings: InstallSettings): Promise<string | undefined> {
  const record = await readRecord(settings.recordPath);
  if (!record) return `no install record at ${settings.recordPath}`;
  if (record.version !== NETPLUG_VERSION) return `the install record says ${record.version}, not ${NETPLUG_VERSION}`;
  const conflist = join(settings.confDir, settings.confName);
  if (
    !(await access(conflist).then(
      () => true,
      () => false,
    ))
  )
    return `no conflist at ${conflist}`;
  return undefined;
}
