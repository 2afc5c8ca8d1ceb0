// The install-cni container: install once, then (SLEEP, the default) stay running to keep the
// plugin's token fresh and the conflist in step with the ConfigMap until SIGTERM, and then
// uninstall if netplug is being removed from the cluster.
import { aborted, sleep } from '../runtime/clock.ts';
import { apiStatus, describeError } from '../runtime/errors.ts';
import type { Log } from '../runtime/log.ts';
import { installOnce } from './install-once.ts';
import { type KubeAccess, openKubeAccess } from './open-kube-access.ts';
import { placeholderValues } from './placeholder-values.ts';
import { keepTokenFresh } from './refresh-token.ts';
import { renderConflist } from './render-conflist.ts';
import type { InstallSettings } from './settings.ts';
import { netplugIsBeingRemoved, uninstall } from './uninstall.ts';
import { watchConfigMap } from './watch-config-map.ts';
import { writeConflist } from './write-conflist.ts';

export async function runInstaller(
  settings: InstallSettings,
  log: Log,
  signal: AbortSignal,
  informers: { watchTimeoutMs?: number } = {},
): Promise<number> {
  let kube: ReturnType<typeof openKubeAccess> | undefined;
  let outcome: Awaited<ReturnType<typeof installOnce>>;
  try {
    kube = openKubeAccess(settings);
    outcome = await installOnce(settings, kube, log);
  } catch (err) {
    log.error(`install failed: ${describeError(err)}`);
    const status = apiStatus(err);
    // Refused by the API server: perhaps netplug is being removed (its RBAC goes before its
    // DaemonSet). Exiting now would leave the node's files to a container that is never started
    // again, so wait a while for the pod's SIGTERM and decide then, as a running installer does.
    if (kube && settings.sleep && (status === 401 || status === 403)) return refusedInstall(settings, kube, log, signal);
    return 1;
  }
  if (!settings.sleep) return 0;

  const running: Promise<void>[] = [];
  if (kube && outcome.tokenExpires && !signal.aborted) running.push(keepTokenFresh(settings, kube, outcome.tokenExpires, log, signal));
  if (kube && settings.configMapName && !signal.aborted) {
    const values = placeholderValues(settings, outcome.tlsCopied);
    running.push(
      watchConfigMap(
        kube,
        settings.configMapName,
        settings.configMapKey,
        (template) => writeConflist(settings, renderConflist(template, values), template.source, log).then(() => {}),
        log,
        signal,
        informers,
      ),
    );
  }
  await aborted(signal);
  await Promise.all(running);
  return kube ? uninstallIfRemoved(settings, kube, log) : 0;
}

/** How long an installer refused by the API server waits for its pod's SIGTERM before it exits 1. */
const REFUSED_WAIT_MS = 30_000;

async function refusedInstall(settings: InstallSettings, kube: KubeAccess, log: Log, signal: AbortSignal): Promise<number> {
  if (await sleep(REFUSED_WAIT_MS, signal)) return 1;
  return (await netplugIsBeingRemoved(kube, log)) ? uninstallFromNode(settings, log) : 1;
}

async function uninstallIfRemoved(settings: InstallSettings, kube: KubeAccess, log: Log): Promise<number> {
  return (await netplugIsBeingRemoved(kube, log)) ? uninstallFromNode(settings, log) : 0;
}

async function uninstallFromNode(settings: InstallSettings, log: Log): Promise<number> {
  try {
    await uninstall(settings, log);
    return 0;
  } catch (err) {
    log.error(`uninstall failed: ${describeError(err)}`);
    return 1;
  }
}
