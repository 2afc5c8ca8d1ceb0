// `netplugctl upgrade rollback`: the recorded upgrade undone in reverse order. Saved objects are
// put back as they were (PUT over the live object; deleted when the upgrade created them), the
// helm release goes back to its recorded revision with `helm rollback`, and steps that only waited
// or whose effect is kept say so. A step marked one-way that has run makes rollback refuse before
// it changes anything, saying why. Going back to a release without network policy, enforcement is
// turned off first and the nodes' agents waited for (policy-off.ts); to a release whose agents
// record no release on their nodes, the records are removed last (version-records.ts). Resumable
// like apply: progress is in the same record.
import type { DatastoreSettings } from '../store/open.ts';
import { removeAllowAllUpgrade } from './allow-all-upgrade.ts';
import { datastoreFor } from './cluster-info.ts';
import { detectInstall } from './detect.ts';
import { runHelm } from './helm.ts';
import { keepPolicyOff, restorePolicySetting, turnPolicyOffBeforeRollback } from './policy-off.ts';
import { describe, type UpgradeKube } from './kube.ts';
import { backupOf, readRecord, type StoredRecord, updateRecord } from './record.ts';
import { runStep, type StepContext } from './run-step.ts';
import { removeVersionRecords } from './version-records.ts';

export class RollbackRefused extends Error {
  override readonly name = 'RollbackRefused';
}

export interface RollbackOptions {
  datastore: DatastoreSettings;
  helmBinary: string;
  timeoutMs: number;
  out: (text: string) => void;
  signal: AbortSignal;
}

export async function rollbackUpgrade(kube: UpgradeKube, options: RollbackOptions): Promise<string> {
  const install = await detectInstall(kube);
  const namespace = install.namespace;
  let stored = await readRecord(kube, namespace);
  if (!stored) throw new RollbackRefused(`no upgrade recorded (no ConfigMap ${namespace}/netplug-upgrade): nothing to roll back`);
  if (stored.record.state === 'rolled-back')
    return `the upgrade to ${stored.record.target} was rolled back already: the cluster runs ${stored.record.from}`;
  const started = (id: string) => ['running', 'done', 'failed'].includes(stored?.record.progress[id]?.state ?? 'pending');
  const oneWay = stored.record.steps.filter((step) => step.rollback === 'one-way' && started(step.id));
  if (oneWay.length)
    throw new RollbackRefused(
      `cannot roll back: ${oneWay.map((step) => `step ${step.id} is one-way (${step.why})`).join('; ')}; nothing was changed`,
    );
  stored = await updateRecord(kube, namespace, (s) => {
    s.record.state = 'rolling-back';
  });
  options.out(`Rolling back the upgrade ${stored.record.from} → ${stored.record.target} (ConfigMap ${namespace}/netplug-upgrade)\n`);
  stored = await turnPolicyOffBeforeRollback(kube, stored, install, options);
  const datastore = datastoreFor(install, options.datastore, kube.kubeconfigPath);
  const rolledBack = async (id: string, said: string) => {
    stored = await updateRecord(kube, namespace, (s) => {
      const progress = s.record.progress[id];
      if (progress) Object.assign(progress, { state: 'rolled-back', message: said });
    });
    options.out(`  ${id}: ${said}\n`);
  };
  for (const step of [...stored.record.steps].reverse()) {
    if (!started(step.id) || stored.record.progress[step.id]?.state === 'rolled-back' || step.rollback === 'remove-version-records')
      continue;
    let said: string;
    if (step.rollback === 'restore') said = await restoreObjects(kube, stored, step.objects ?? []);
    else if (step.rollback === 'delete-created') said = await removeAllowAllUpgrade(datastore);
    else if (step.rollback === 'helm-rollback') {
      const helm = stored.record.helm;
      if (!helm) throw new Error('the record has no helm release');
      await runHelm(
        options.helmBinary,
        ['rollback', helm.release, String(helm.revision), '-n', helm.namespace],
        kube.kubeconfigPath,
        options.signal,
      );
      await keepPolicyOff(kube, stored);
      said = `helm release ${helm.namespace}/${helm.release} rolled back to revision ${helm.revision}`;
    } else said = `kept: ${step.why ?? 'nothing to undo'}`;
    await rolledBack(step.id, said);
  }
  // The previous release rolls out again: wait for it as apply waits for the new one.
  const ctx: StepContext = {
    kube,
    target: stored.record.from,
    namespace,
    operatorNamespace: stored.record.method === 'manifest' ? undefined : install.operatorNamespace,
    objects: [],
    crds: [],
    datastore,
    timeoutMs: options.timeoutMs,
    signal: options.signal,
    progress: options.out,
  };
  const waited = await runStep({ id: 'wait-rollout', title: '', operations: [], rollback: 'keep' }, ctx);
  options.out(`  ${waited}\n`);
  // Whether or not the step ran: an agent of the upgrade's release may have recorded it all the same.
  for (const step of stored.record.steps) {
    if (step.rollback !== 'remove-version-records' || stored.record.progress[step.id]?.state === 'rolled-back') continue;
    await rolledBack(step.id, await removeVersionRecords(kube, datastore));
  }
  stored = await restorePolicySetting(kube, stored, install);
  await updateRecord(kube, namespace, (s) => {
    s.record.state = 'rolled-back';
    delete s.record.current;
  });
  return `rolled back: the cluster runs ${stored.record.from} again`;
}

/** Puts each saved object back, in reverse order; removes those the upgrade created. */
async function restoreObjects(
  kube: UpgradeKube,
  stored: StoredRecord,
  refs: StoredRecord['record']['steps'][number]['objects'] & object,
): Promise<string> {
  let restored = 0;
  let removed = 0;
  for (const ref of [...refs].reverse()) {
    const backup = backupOf(stored, ref);
    if (!backup) continue;
    const live = await kube.getOrNothing(ref);
    if (backup.object === null) {
      if (live && (await kube.delete(ref, live.metadata.uid))) removed++;
      continue;
    }
    const { resourceVersion: _rv, ...metadata } = backup.object.metadata;
    if (live) await kube.replace({ ...backup.object, metadata: { ...metadata, resourceVersion: live.metadata.resourceVersion } });
    else await kube.create({ ...backup.object, metadata });
    restored++;
  }
  return `${restored} object(s) restored${removed ? `, ${removed} created by the upgrade removed` : ''}${refs.length ? ` (${refs.map(describe).slice(0, 4).join(', ')}${refs.length > 4 ? ', ...' : ''})` : ''}`;
}
