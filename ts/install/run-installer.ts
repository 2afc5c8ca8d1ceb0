// The install-cni container: install once, then (SLEEP, the default) stay running to keep the
// plugin's token fresh and the conflist in step with the ConfigMap until SIGTERM, and then
// uninstall if netplug is being removed from the cluster.
import { installOnce } from './install-once.ts';
import type { Log } from './log.ts';
import { describeApiError, openKubeAccess } from './open-kube-access.ts';
import { aborted } from './pause.ts';
import { placeholderValues } from './placeholder-values.ts';
import { keepTokenFresh } from './refresh-token.ts';
import { renderConflist } from './render-conflist.ts';
import type { InstallSettings } from './settings.ts';
import { netplugIsBeingRemoved, uninstall } from './uninstall.ts';
import { watchConfigMap } from './watch-config-map.ts';
import { writeConflist } from './write-conflist.ts';

export async function runInstaller(settings: InstallSettings, log: Log, signal: AbortSignal): Promise<number> {
  let kube: ReturnType<typeof openKubeAccess>;
  let outcome: Awaited<ReturnType<typeof installOnce>>;
  try {
    kube = openKubeAccess(settings);
    outcome = await installOnce(settings, kube, log);
  } catch (err) {
    log('ERROR', `install failed: ${describeApiError(err)}`);
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
      ),
    );
  }
  await aborted(signal);
  await Promise.all(running);
  if (kube && (await netplugIsBeingRemoved(kube, log))) {
    try {
      await uninstall(settings, log);
    } catch (err) {
      log('ERROR', `uninstall failed: ${(err as Error).message}`);
      return 1;
    }
  }
  return 0;
}
