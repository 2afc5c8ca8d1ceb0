// `netplugctl upgrade apply`: the plan's steps, run in order with the progress recorded in the
// cluster first. A run that finds an unfinished record resumes it (the same files are required: the
// plan hash says so); one that finds a finished record for the same plan does nothing.
import { REVIEW_STEPS } from './allow-all-upgrade.ts';
import { datastoreFor } from './cluster-info.ts';
import { describe, type Json, type UpgradeKube } from './kube.ts';
import type { Plan, UpgradeInputs } from './plan.ts';
import { formatPlan } from './print.ts';
import { addBackup, backupOf, createRecord, readRecord, refKey, type StoredRecord, updateRecord, type UpgradeRecord } from './record.ts';
import { runStep, type StepContext } from './run-step.ts';

export interface ApplyOptions {
  yes: boolean;
  timeoutMs: number;
  out: (text: string) => void;
  signal: AbortSignal;
}

export class ApplyRefused extends Error {
  override readonly name = 'ApplyRefused';
  readonly exitCode: number;

  constructor(message: string, exitCode = 1) {
    super(message);
    this.exitCode = exitCode;
  }
}

export async function applyUpgrade(kube: UpgradeKube, plan: Plan, inputs: UpgradeInputs, options: ApplyOptions): Promise<string> {
  const namespace = plan.install.namespace;
  let stored = await readRecord(kube, namespace);
  if (stored?.record.state === 'rolling-back')
    throw new ApplyRefused(
      `a rollback of the upgrade to ${stored.record.target} is in progress: run netplugctl upgrade rollback again to finish it`,
    );
  if (stored && stored.record.hash !== plan.hash && ['running', 'failed'].includes(stored.record.state))
    throw new ApplyRefused(
      `an upgrade to ${stored.record.target} started ${stored.record.startedAt} with other files or another procedure is unfinished (ConfigMap ${namespace}/netplug-upgrade): run apply with the same files to finish it, or netplugctl upgrade rollback`,
    );
  if (stored?.record.state === 'done' && stored.record.hash === plan.hash)
    return `the upgrade to ${stored.record.target} is complete (ConfigMap ${namespace}/netplug-upgrade): nothing to do`;
  if (!stored || !['running', 'failed'].includes(stored.record.state)) {
    if (plan.state === 'current') return `the cluster runs ${plan.current}, at or beyond ${plan.target}: nothing to do`;
    if (plan.state === 'blocked') {
      options.out(formatPlan(plan));
      throw new ApplyRefused(`the upgrade is blocked: ${plan.blockedBy.join('; ')}`);
    }
    if (!options.yes) {
      options.out(formatPlan(plan));
      throw new ApplyRefused('nothing done: add --yes to perform these steps', 2);
    }
    // A finished or rolled-back record of an earlier upgrade gives way to this one.
    if (stored) await kube.delete({ apiVersion: 'v1', kind: 'ConfigMap', name: 'netplug-upgrade', namespace });
    const record: UpgradeRecord = {
      hash: plan.hash,
      target: plan.target,
      from: plan.current ?? 'unknown',
      method: plan.install.method,
      namespace,
      startedAt: new Date().toISOString(),
      state: 'running',
      steps: plan.steps,
      progress: Object.fromEntries(plan.steps.map((step) => [step.id, { state: 'pending' as const }])),
      ...(plan.helm ? { helm: { release: plan.helm.release, namespace: plan.helm.namespace, revision: plan.helm.revision } } : {}),
    };
    if (!(await createRecord(kube, record)))
      throw new ApplyRefused(`another netplugctl upgrade apply created ConfigMap ${namespace}/netplug-upgrade just now`);
    options.out(
      `Upgrading ${plan.current} → ${plan.target} (${plan.install.method} install in ${namespace}); progress in ConfigMap ${namespace}/netplug-upgrade\n`,
    );
    stored = (await readRecord(kube, namespace)) as StoredRecord;
  } else {
    options.out(
      `Resuming the upgrade to ${stored.record.target} started ${stored.record.startedAt} (ConfigMap ${namespace}/netplug-upgrade)\n`,
    );
  }

  const ctx: StepContext = {
    kube,
    target: stored.record.target,
    namespace,
    operatorNamespace: plan.install.method === 'manifest' ? undefined : plan.install.operatorNamespace,
    objects: plan.objects,
    crds: plan.crds,
    helm: plan.helm && stored.record.helm ? { ...plan.helm, revision: stored.record.helm.revision } : undefined,
    datastore: datastoreFor(plan.install, inputs.datastore, kube.kubeconfigPath),
    timeoutMs: options.timeoutMs,
    signal: options.signal,
    progress: options.out,
  };
  const steps = stored.record.steps;
  for (const [i, step] of steps.entries()) {
    if (stored.record.progress[step.id]?.state === 'done') continue;
    // Saved before the step changes anything, in one write; a resumed step keeps the first copies.
    const saved = step.rollback === 'restore' ? (step.objects ?? []) : [];
    const unsaved = saved.filter((ref) => !backupOf(stored as StoredRecord, ref));
    const live = new Map<string, Json | undefined>();
    for (const ref of unsaved) live.set(refKey(ref), await kube.getOrNothing(ref));
    stored = await updateRecord(kube, namespace, (s) => {
      const progress = s.record.progress[step.id] ?? { state: 'pending' };
      s.record.current = step.id;
      s.record.state = 'running';
      progress.state = 'running';
      progress.startedAt ??= new Date().toISOString();
      progress.before ??= {};
      for (const ref of unsaved) {
        const object = live.get(refKey(ref));
        addBackup(s, ref, object);
        progress.before[refKey(ref)] = object?.metadata?.resourceVersion ?? null;
      }
      s.record.progress[step.id] = progress;
    });
    // Announced once recorded as running: a kill from here on finds the record saying so.
    options.out(`[${i + 1}/${steps.length}] ${step.title}\n`);
    let message: string;
    try {
      message = await runStep(step, ctx);
    } catch (err) {
      const reason = (err as Error).message.split('\n')[0] ?? String(err);
      await updateRecord(kube, namespace, (s) => {
        s.record.state = 'failed';
        s.record.message = `${step.id}: ${reason}`;
        const progress = s.record.progress[step.id];
        if (progress) Object.assign(progress, { state: 'failed', message: reason });
      }).catch(() => undefined);
      throw new ApplyRefused(`step ${i + 1} (${step.id}) failed: ${reason}; run apply again to resume, or netplugctl upgrade rollback`);
    }
    const after: Record<string, string | null> = {};
    for (const ref of saved) after[refKey(ref)] = (await kube.getOrNothing(ref))?.metadata?.resourceVersion ?? null;
    stored = await updateRecord(kube, namespace, (s) => {
      const progress = s.record.progress[step.id];
      if (progress) Object.assign(progress, { state: 'done', finishedAt: new Date().toISOString(), message, after });
    });
    options.out(`  done: ${message}\n`);
  }
  await updateRecord(kube, namespace, (s) => {
    s.record.state = 'done';
    delete s.record.current;
    delete s.record.message;
  });
  const next = steps.some((step) => step.id === 'allow-all-upgrade') ? `\nNext: ${REVIEW_STEPS}` : '';
  return `the cluster runs ${stored.record.target} (${steps.length} steps done; netplugctl upgrade rollback restores ${describeRestorable(stored)})${next}`;
}

const describeRestorable = (stored: StoredRecord) =>
  [...stored.backups.values()].map((b) => describe(b.ref)).join(', ') || (stored.record.helm ? 'the helm release revision' : 'nothing');
