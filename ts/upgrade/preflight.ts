// The plan's preflight: the version window, every node Ready, no
// rollout of netplug's workloads in progress, the datastore reachable and not paused for a
// migration, the stored versions of the CRDs still served by the new ones, the dry run accepted,
// and for helm a release that is not in the middle of another operation.
import { existsSync } from 'node:fs';

import type { ClusterInfoRead } from './cluster-info.ts';
import { CONTROLLERS_DEPLOYMENT, type Install, NODE_DAEMONSET, OPERATOR_DEPLOYMENT } from './detect.ts';
import type { DryRunResult } from './dry-run.ts';
import { describe, type Json, type ObjectRef, type UpgradeKube } from './kube.ts';
import { rolloutOf } from './rollout.ts';
import type { Window } from './versions.ts';

export interface Check {
  name: string;
  ok: boolean;
  detail: string;
}

export interface PreflightInputs {
  install: Install;
  window: Window;
  clusterInfo: ClusterInfoRead;
  crds: readonly Json[];
  dryRun: readonly DryRunResult[];
  helm?: { release: string; namespace: string; binary?: string } | undefined;
  /** The cluster needs no upgrade: only the version and the nodes are reported. */
  nodesOnly: boolean;
}

export async function preflightChecks(kube: UpgradeKube, inputs: PreflightInputs): Promise<{ checks: Check[]; storageChanges: string[] }> {
  const { install, window } = inputs;
  const checks: Check[] = [];
  checks.push(
    window.state === 'refused'
      ? { name: 'version window', ok: false, detail: window.reason }
      : {
          name: 'version window',
          ok: true,
          detail: window.state === 'current' ? `the cluster runs ${window.from}: nothing to do` : `${window.from} → upgrade supported`,
        },
  );
  const nodes = await kube.list('v1', 'Node');
  const notReady = nodes.filter((n) => !(n.status?.conditions ?? []).some((c: Json) => c.type === 'Ready' && c.status === 'True'));
  checks.push({
    name: 'nodes Ready',
    ok: nodes.length > 0 && notReady.length === 0,
    detail: notReady.length ? `not Ready: ${notReady.map((n) => n.metadata.name).join(', ')}` : `${nodes.length}/${nodes.length}`,
  });
  if (inputs.nodesOnly) return { checks, storageChanges: [] };

  const workloads: ObjectRef[] = [
    { apiVersion: 'apps/v1', kind: 'DaemonSet', name: NODE_DAEMONSET, namespace: install.namespace },
    { apiVersion: 'apps/v1', kind: 'Deployment', name: CONTROLLERS_DEPLOYMENT, namespace: install.namespace },
    ...(install.operatorNamespace
      ? [{ apiVersion: 'apps/v1', kind: 'Deployment', name: OPERATOR_DEPLOYMENT, namespace: install.operatorNamespace }]
      : []),
  ];
  const moving: string[] = [];
  for (const ref of workloads) {
    const object = await kube.getOrNothing(ref);
    if (!object) continue;
    const rollout = rolloutOf(object);
    if (!rollout.settled) moving.push(`${describe(ref)} (${rollout.detail})`);
  }
  checks.push({
    name: 'no rollout in progress',
    ok: moving.length === 0,
    detail: moving.length ? moving.join('; ') : 'netplug’s workloads settled',
  });

  const { info, problem, where } = inputs.clusterInfo;
  checks.push(
    problem
      ? { name: 'datastore', ok: false, detail: `${where}: ${problem}` }
      : info?.datastoreReady === false
        ? {
            name: 'datastore',
            ok: false,
            detail: `${where}: datastoreReady is false (locked for a migration: netplugctl datastore migrate unlock)`,
          }
        : { name: 'datastore', ok: true, detail: `${where}: ${info ? 'datastoreReady' : 'no ClusterInformation yet'}` },
  );

  const { unserved, storageChanges } = await compareCrds(kube, inputs.crds);
  checks.push({
    name: 'CRD stored versions',
    ok: unserved.length === 0,
    detail: unserved.length
      ? `stored but not served by the new CRDs: ${unserved.join(', ')}`
      : 'every stored version is served by the new CRDs',
  });

  const refused = inputs.dryRun.filter((r) => r.outcome === 'refused');
  checks.push({
    name: 'server-side dry run',
    ok: refused.length === 0,
    detail: refused.length
      ? refused.map((r) => `${describe(r.object)}: ${r.summary}`).join('; ')
      : `${inputs.dryRun.length} objects accepted`,
  });

  if (install.method === 'helm' && inputs.helm) {
    const status = install.helm?.status ?? 'not found';
    checks.push({
      name: 'helm release',
      ok: status === 'deployed',
      detail:
        status === 'deployed'
          ? `${inputs.helm.namespace}/${inputs.helm.release} revision ${install.helm?.revision} deployed`
          : `${inputs.helm.namespace}/${inputs.helm.release} is ${status}: another helm operation is in progress or failed (helm history ${inputs.helm.release} -n ${inputs.helm.namespace})`,
    });
    if (inputs.helm.binary?.includes('/'))
      checks.push({ name: 'helm binary', ok: existsSync(inputs.helm.binary), detail: inputs.helm.binary });
  }
  return { checks, storageChanges };
}

/** Live CRDs' stored versions the new CRDs no longer serve, and CRDs whose storage version changes. */
async function compareCrds(kube: UpgradeKube, crds: readonly Json[]): Promise<{ unserved: string[]; storageChanges: string[] }> {
  const unserved: string[] = [];
  const storageChanges: string[] = [];
  for (const crd of crds) {
    const live = await kube.getOrNothing({
      apiVersion: 'apiextensions.k8s.io/v1',
      kind: 'CustomResourceDefinition',
      name: crd.metadata.name,
    });
    if (!live) continue;
    const served = new Set((crd.spec?.versions ?? []).filter((v: Json) => v.served).map((v: Json) => v.name));
    for (const stored of live.status?.storedVersions ?? []) if (!served.has(stored)) unserved.push(`${crd.metadata.name} ${stored}`);
    const storage = (versions: Json[] | undefined) => (versions ?? []).find((v) => v.storage)?.name;
    if (storage(live.spec?.versions) !== storage(crd.spec?.versions)) storageChanges.push(crd.metadata.name);
  }
  return { unserved, storageChanges };
}
