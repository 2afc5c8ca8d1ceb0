// etcd TLS files (TLS_ASSETS_DIR: etcd-ca, etcd-cert, etcd-key, from the etcd manifest's Secret)
// into <conf dir>/netplug-tls/, where the conflist's etcd_*_file fields point. Each file is
// replaced atomically (a plugin may be reading it); one the Secret no longer has is removed.
import { mkdir, readFile, rm } from 'node:fs/promises';
import { join } from 'node:path';

import type { Log } from '../runtime/log.ts';
import { type InstallSettings, TLS_DIR_NAME, TLS_FILES } from './settings.ts';
import { writeFileAtomically } from './write-atomically.ts';

export type TlsAssets = [name: string, content: Buffer][];

/** The TLS files TLS_ASSETS_DIR has (none when it does not exist). */
export async function readTlsAssets(settings: InstallSettings): Promise<TlsAssets> {
  const found: TlsAssets = [];
  for (const name of TLS_FILES) {
    const content = await readFile(join(settings.tlsAssetsDir, name)).catch(() => undefined);
    if (content && content.length > 0) found.push([name, content]);
  }
  return found;
}

/** Copies `found`; with none, removes the directory a previous install made. */
export async function copyTlsAssets(settings: InstallSettings, found: TlsAssets, log: Log): Promise<boolean> {
  const target = join(settings.confDir, TLS_DIR_NAME);
  if (found.length === 0) {
    await rm(target, { recursive: true, force: true });
    return false;
  }
  await mkdir(target, { recursive: true, mode: 0o700 });
  for (const [name, content] of found) await writeFileAtomically(join(target, name), content, 0o600);
  for (const name of TLS_FILES) if (!found.some(([copied]) => copied === name)) await rm(join(target, name), { force: true });
  log.info(`copied etcd TLS files (${found.map(([name]) => name).join(', ')}) to ${join(settings.hostNetDir, TLS_DIR_NAME)}`);
  return true;
}
