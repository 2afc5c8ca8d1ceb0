// Before a rollback to a release without network policy (older than POLICY_SINCE), enforcement is
// turned off in the release that runs. netplug-node's policy part of `inet netplug` is fail closed
// and stays in the kernel while no agent of this release runs; the previous release's agents never
// touch it, so every pod they network would get no packet through. An agent started with
// enforcement off deletes that part before it is ready (its first write replaces the table, and
// the `nat` readiness check waits for that write; with no part left it deletes the table before
// serving anything), so the signal is the node DaemonSet rolled out from a template with
// enforcement off: every node pod updated and available.
//
// manifest: netplug-config's policy_enforcement "false" (or the variable's own value) and a
// restart of the pod template; the rollback's restore then puts both objects back as they were.
// operator, helm: the Installation's spec.policy.enforcement Disabled, a patch of netplugctl's own
// rather than a helm value. helm rollback patches a custom resource with the difference between
// the two revisions' manifests, so a field neither sets stays Disabled while the operator of this
// release is replaced; a helm value would go back to the default (Enabled) at that moment, which
// that operator could still roll out. Once the previous release runs, the field is put back as it was.
import { compareVersions } from '../model/release-versions.ts';
import type { Install } from './detect.ts';
import { NODE_DAEMONSET, nodeVersions } from './detect.ts';
import { describe, type Json, type ObjectRef, type UpgradeKube } from './kube.ts';
import { type StoredRecord, updateRecord } from './record.ts';
import { rolloutOf, waitFor } from './rollout.ts';
import { versionOfImage } from './versions.ts';

/** The first release whose netplug-node enforces network policy. */
const POLICY_SINCE = 'v3.31.0';
const VARIABLE = 'NETPLUG_POLICY_ENFORCEMENT';
/** What `kubectl rollout restart` sets: a new template, so every node pod starts again. */
const RESTARTED_AT = 'kubectl.kubernetes.io/restartedAt';
const INSTALLATION: ObjectRef = { apiVersion: 'operator.projectnet.org/v1', kind: 'Installation', name: 'default' };
/** The steps that put this release's netplug-node on the nodes. */
const DEPLOYING_STEPS = new Set(['apply-manifest', 'apply-operator', 'helm-upgrade']);

export const hasPolicyAgent = (version: string | undefined) => version !== undefined && (compareVersions(version, POLICY_SINCE) ?? -1) >= 0;

export interface PolicyOffOptions {
  timeoutMs: number;
  out: (text: string) => void;
  signal: AbortSignal;
}

/**
 * Turns enforcement off and waits until every node's agent runs with it off, when the rollback
 * goes to a release without a policy agent (a `from` that is not a version counts as one) and
 * this release's agent was deployed. Recorded, so that a resumed rollback does not do it again.
 */
export async function turnPolicyOffBeforeRollback(
  kube: UpgradeKube,
  stored: StoredRecord,
  install: Install,
  options: PolicyOffOptions,
): Promise<StoredRecord> {
  const { record } = stored;
  if (hasPolicyAgent(record.from) || record.policyOff?.state === 'done' || record.policyOff?.state === 'restored') return stored;
  const deployed = record.steps.some(
    (step) => DEPLOYING_STEPS.has(step.id) && ['running', 'done', 'failed'].includes(record.progress[step.id]?.state ?? 'pending'),
  );
  const ds = await kube.getOrNothing(daemonSetRef(install));
  const running = [versionOfImage(agentOf(ds)?.image), ...(await nodeVersions(kube, install.namespace)).map((node) => node.version)];
  if (!deployed || !running.some(hasPolicyAgent)) return stored;

  const namespace = install.namespace;
  let installation: Json | undefined;
  if (install.method !== 'manifest') {
    installation = await kube.getOrNothing(INSTALLATION);
    if (!installation) throw new Error(`${describe(INSTALLATION)} does not exist: cannot turn network policy enforcement off`);
  }
  stored = await updateRecord(kube, namespace, (s) => {
    s.record.policyOff ??= {
      state: 'running',
      restartedAt: new Date().toISOString(),
      previous: installation?.spec?.policy?.enforcement ?? null,
    };
  });
  const policyOff = stored.record.policyOff as NonNullable<StoredRecord['record']['policyOff']>;
  options.out(`  policy: ${record.from} has no network policy: turning enforcement off first, so that no node keeps netplug's rules\n`);
  const how = install.method === 'manifest' ? await offInManifest(kube, install, policyOff.restartedAt) : await offInInstallation(kube);
  const rollout = await waitFor(
    `netplug-node with enforcement off on every node`,
    async () => {
      const current = await kube.getOrNothing(daemonSetRef(install));
      if (!current) return { done: 'no node DaemonSet' };
      const off = await enforcementOff(kube, current, install, policyOff.restartedAt);
      if (off !== true) return { waiting: off };
      const state = rolloutOf(current);
      return state.settled ? { done: state.detail } : { waiting: state.detail };
    },
    options.timeoutMs,
    options.signal,
    options.out,
  );
  options.out(`  policy: enforcement off (${how}); ${describe(daemonSetRef(install))} rolled out: ${rollout}\n`);
  return updateRecord(kube, namespace, (s) => {
    if (s.record.policyOff) s.record.policyOff.state = 'done';
  });
}

/**
 * After `helm rollback`: the Installation's Disabled again if the revision's patch took it away
 * (the revision rolled back from set the field), for as long as this release's operator may run.
 */
export async function keepPolicyOff(kube: UpgradeKube, stored: StoredRecord): Promise<void> {
  if (stored.record.policyOff?.state !== 'done') return;
  const installation = await kube.getOrNothing(INSTALLATION);
  if (installation && installation.spec?.policy?.enforcement !== 'Disabled') await offInInstallation(kube);
}

/**
 * Once the previous release runs: the Installation's field as it was before (this release's
 * operator writes its default, Enabled, into the spec; the previous release's ignores it).
 * Manifests: the restore put the objects back.
 */
export async function restorePolicySetting(kube: UpgradeKube, stored: StoredRecord, install: Install): Promise<StoredRecord> {
  const policyOff = stored.record.policyOff;
  if (policyOff?.state !== 'done') return stored;
  if (install.method !== 'manifest' && (await kube.getOrNothing(INSTALLATION))) {
    await kube.mergePatch(INSTALLATION, { spec: { policy: { enforcement: policyOff.previous } } });
  }
  return updateRecord(kube, install.namespace, (s) => {
    if (s.record.policyOff) s.record.policyOff.state = 'restored';
  });
}

const daemonSetRef = (install: Install): ObjectRef => ({
  apiVersion: 'apps/v1',
  kind: 'DaemonSet',
  name: NODE_DAEMONSET,
  namespace: install.namespace,
});

const agentOf = (ds: Json | undefined): Json | undefined =>
  (ds?.spec?.template?.spec?.containers ?? []).find((c: Json) => c.name === NODE_DAEMONSET);

async function offInInstallation(kube: UpgradeKube): Promise<string> {
  await kube.mergePatch(INSTALLATION, { spec: { policy: { enforcement: 'Disabled' } } });
  return `${describe(INSTALLATION)} spec.policy.enforcement Disabled`;
}

/** The variable where the template takes it from (netplug-config's key, or its own value), then a restart of the template. */
async function offInManifest(kube: UpgradeKube, install: Install, restartedAt: string): Promise<string> {
  const ref = daemonSetRef(install);
  const ds = await kube.get(ref);
  const containers: Json[] = ds.spec.template.spec.containers;
  const index = containers.findIndex((c) => c.name === NODE_DAEMONSET);
  const env: Json[] = containers[index]?.env ?? [];
  const at = env.findIndex((e) => e.name === VARIABLE);
  const variable = env[at];
  const fromConfig = variable?.valueFrom?.configMapKeyRef;
  let said: string;
  if (fromConfig) {
    const config: ObjectRef = { apiVersion: 'v1', kind: 'ConfigMap', name: fromConfig.name, namespace: install.namespace };
    await kube.mergePatch(config, { data: { [fromConfig.key]: 'false' } });
    said = `${describe(config)} ${fromConfig.key} "false"`;
  } else if (variable && 'value' in variable) {
    const path = `/spec/template/spec/containers/${index}/env/${at}`;
    await kube.jsonPatch(ref, [
      { op: 'test', path: `${path}/name`, value: VARIABLE },
      { op: 'replace', path: `${path}/value`, value: 'false' },
    ]);
    said = `${VARIABLE}=false on the template`;
  } else said = `${VARIABLE} unset on the template (off)`;
  await kube.mergePatch(ref, { spec: { template: { metadata: { annotations: { [RESTARTED_AT]: restartedAt } } } } });
  return `${said}, the node pods restarted`;
}

/** true when pods of the DaemonSet's template run with enforcement off; else what it says. */
async function enforcementOff(kube: UpgradeKube, ds: Json, install: Install, restartedAt: string | undefined): Promise<true | string> {
  const agent = agentOf(ds);
  if (!hasPolicyAgent(versionOfImage(agent?.image))) return true;
  const variable = (agent?.env ?? []).find((e: Json) => e.name === VARIABLE);
  const fromConfig = variable?.valueFrom?.configMapKeyRef;
  let value: string | undefined = variable?.value;
  if (fromConfig) {
    const config = await kube.getOrNothing({ apiVersion: 'v1', kind: 'ConfigMap', name: fromConfig.name, namespace: install.namespace });
    value = config?.data?.[fromConfig.key];
  }
  // Unset, netplug-node's default is off.
  if (value !== undefined && value !== 'false') return `the template's ${VARIABLE} is "${value}"`;
  if (install.method === 'manifest' && ds.spec.template.metadata?.annotations?.[RESTARTED_AT] !== restartedAt)
    return 'the node pods not yet restarted';
  return true;
}
