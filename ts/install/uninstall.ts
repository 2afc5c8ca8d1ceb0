// On SIGTERM the installer removes what it installed only when netplug itself is being removed from
// the cluster: its DaemonSet is gone (404) or being deleted (deletionTimestamp), or our identity is
// refused because its ServiceAccount (401) or its RBAC (403) was deleted with the manifest. A
// rolling update or a killed pod leaves everything, so running pods and new sandboxes keep working.
// netplug-node asks the same when it stops, for its nftables table (ts/node/main.ts).
import { rm } from 'node:fs/promises';
import { join } from 'node:path';

import { sleep } from '../runtime/clock.ts';
import { apiStatus, describeError } from '../runtime/errors.ts';
import type { Log } from '../runtime/log.ts';
import type { KubeAccess } from './open-kube-access.ts';
import { readRecord, removeRecordedFiles } from './record.ts';
import { type InstallSettings, KUBECONFIG_NAME, TLS_DIR_NAME } from './settings.ts';

const DAEMONSET_NAME = 'netplug-node';
/** One question to the API server may take this long; an unclear answer is asked again until DECIDE_MS. */
const ASK_TIMEOUT_MS = 5_000;
/** Well inside the node pod's 30 s grace period, so the uninstall itself still has time. */
const DECIDE_MS = 20_000;
const RETRY_MS = 1_000;

/** What the caller does either way, for its log lines. */
interface Outcomes {
  removing: string;
  keeping: string;
}

const CNI_PLUGIN: Outcomes = { removing: 'uninstalling the CNI plugin', keeping: 'leaving the CNI plugin installed' };

export async function netplugIsBeingRemoved(
  kube: Pick<KubeAccess, 'apps' | 'namespace'>,
  log: Log,
  outcomes: Outcomes = CNI_PLUGIN,
): Promise<boolean> {
  const where = `DaemonSet ${kube.namespace}/${DAEMONSET_NAME}`;
  const deadline = Date.now() + DECIDE_MS;
  for (;;) {
    const answer = await askDaemonSet(kube);
    if (answer.kind === 'gone') {
      log.info(`${where}: ${answer.why}, so netplug is being removed: ${outcomes.removing}`);
      return true;
    }
    if (answer.kind === 'present') {
      log.info(`${where} exists: ${outcomes.keeping}`);
      return false;
    }
    if (Date.now() + RETRY_MS >= deadline) {
      log.warning(`cannot tell whether netplug is being removed (${where}: ${answer.why}): ${outcomes.keeping}`);
      return false;
    }
    await sleep(RETRY_MS);
  }
}

type Answer = { kind: 'gone' | 'present' | 'unclear'; why: string };

async function askDaemonSet(kube: Pick<KubeAccess, 'apps' | 'namespace'>): Promise<Answer> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${ASK_TIMEOUT_MS / 1000} s`)), ASK_TIMEOUT_MS);
  });
  try {
    const daemonSet = await Promise.race([kube.apps.readNamespacedDaemonSet({ name: DAEMONSET_NAME, namespace: kube.namespace }), timeout]);
    return daemonSet.metadata?.deletionTimestamp ? { kind: 'gone', why: 'being deleted' } : { kind: 'present', why: 'exists' };
  } catch (err) {
    const status = apiStatus(err);
    return { kind: status === 404 || status === 401 || status === 403 ? 'gone' : 'unclear', why: describeError(err) };
  } finally {
    clearTimeout(timer);
  }
}

/** Removes the recorded binaries, the conflist, the kubeconfig, the TLS files and the record. */
export async function uninstall(settings: InstallSettings, log: Log): Promise<void> {
  const record = await readRecord(settings.recordPath);
  if (record) await removeRecordedFiles(settings, record.files, new Set(), log);
  await rm(join(settings.confDir, settings.confName), { force: true });
  await rm(join(settings.confDir, KUBECONFIG_NAME), { force: true });
  await rm(join(settings.confDir, TLS_DIR_NAME), { recursive: true, force: true });
  await rm(settings.recordPath, { force: true });
  log.info('netplug CNI uninstalled from this node');
}
