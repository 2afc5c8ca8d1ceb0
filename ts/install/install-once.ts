// One install, in an order that writes nothing when the template is bad and leaves the host
// usable after a crash at any point: template rendered and checked first; then TLS files,
// binaries (and removal of those this version no longer ships), the plugin's kubeconfig, the
// conflist; the record last, so `--check` passes only after everything is in place.
import { mkdir } from 'node:fs/promises';
import { dirname } from 'node:path';

import { chooseTemplate } from './choose-template.ts';
import { copyBinaries } from './copy-binaries.ts';
import { copyTlsAssets, readTlsAssets } from './copy-tls.ts';
import type { Log } from '../runtime/log.ts';
import type { KubeAccess } from './open-kube-access.ts';
import { placeholderValues } from './placeholder-values.ts';
import { readRecord, removeRecordedFiles, writeRecord } from './record.ts';
import { renderConflist } from './render-conflist.ts';
import type { InstallSettings } from './settings.ts';
import { writeConflist } from './write-conflist.ts';
import { removeStaleTemps } from './write-atomically.ts';
import { writeKubeconfig } from './write-kubeconfig.ts';

export interface InstallOutcome {
  /** Binary names copied (not already identical). */
  copied: string[];
  /** Whether TLS files were installed (the conflist names them). */
  tlsCopied: boolean;
  /** When the kubeconfig's token expires; undefined when none was written (no API access). */
  tokenExpires: Date | undefined;
}

export async function installOnce(settings: InstallSettings, kube: KubeAccess | undefined, log: Log): Promise<InstallOutcome> {
  const template = await chooseTemplate(settings, kube, log);
  const tls = await readTlsAssets(settings);
  const conflist = renderConflist(template, placeholderValues(settings, tls.length > 0));

  await mkdir(settings.confDir, { recursive: true });
  for (const dir of [settings.binDir, settings.confDir, dirname(settings.recordPath)]) await removeStaleTemps(dir);
  const previous = await readRecord(settings.recordPath);
  const tlsCopied = await copyTlsAssets(settings, tls, log);
  const binaries = await copyBinaries(settings, previous?.files ?? [], log);
  if (previous) await removeRecordedFiles(settings, previous.files, binaries.shipped, log);
  let tokenExpires: Date | undefined;
  if (kube) tokenExpires = await writeKubeconfig(settings, kube, log);
  else log.info('not running as a pod (no service account token) and no KUBECONFIG: no kubeconfig written for the plugin');
  await writeConflist(settings, conflist, template.source, log);
  await writeRecord(settings.recordPath, binaries.installed);
  log.info(
    `netplug CNI installed: ${binaries.copied.length} binaries copied, ${binaries.installed.length - binaries.copied.length} already up to date`,
  );
  return { copied: binaries.copied, tlsCopied, tokenExpires };
}
