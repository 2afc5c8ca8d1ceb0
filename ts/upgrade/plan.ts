// `netplugctl upgrade plan`: what is installed, what stands in the way, what the server would do
// with each object, and the ordered steps. Reads only (the dry run included).
import { UsageError } from '../ctl/usage.ts';
import { lowestVersion } from '../model/release-versions.ts';
import type { DatastoreSettings } from '../store/open.ts';
import { datastoreFor, readClusterInformation, type ClusterInfoRead } from './cluster-info.ts';
import { detectInstall, type Install } from './detect.ts';
import { dryRunApply, type DryRunResult } from './dry-run.ts';
import {
  type AllowAllDecision,
  allowAllUpgradeOperation,
  allowAllUpgradePolicy,
  decideAllowAllUpgrade,
  findUnenforcedPolicies,
  SKIP_FLAG,
  type UnenforcedPolicies,
} from './allow-all-upgrade.ts';
import { auditFieldManagers, type LegacyFields } from './field-managers.ts';
import { describe, type Json, refOf, type UpgradeKube } from './kube.ts';
import { findOwnerReferenceDescriptions } from './owner-references.ts';
import { hasPolicyAgent } from './policy-off.ts';
import { preflightChecks, type Check } from './preflight.ts';
import { isCrd, type ReleaseFile, renderedOperatorManifest, sha256 } from './release-files.ts';
import { stepsFor, type Step } from './steps.ts';
import { manifestFileOf, variantMismatch, variantOfObjects } from './variant.ts';
import { TARGET, versionWindow } from './versions.ts';

export interface UpgradeInputs {
  kubeconfig?: string | undefined;
  /** netplugctl's datastore flags (etcd installs). */
  datastore: DatastoreSettings;
  manifest?: ReleaseFile | undefined;
  crds?: ReleaseFile | undefined;
  operatorCrds?: ReleaseFile | undefined;
  operatorManifest?: ReleaseFile | undefined;
  chart?: string | undefined;
  release?: string | undefined;
  helmNamespace?: string | undefined;
  helmBinary: string;
  /** Leave allow-all-upgrade out: the policies a release without a policy agent never enforced apply at once. */
  skipAllowAllUpgrade?: boolean | undefined;
}

export interface Plan {
  target: string;
  current: string | undefined;
  /** ready: apply may run; blocked: see blockedBy; current: nothing to do. */
  state: 'ready' | 'blocked' | 'current';
  blockedBy: string[];
  install: Omit<Install, 'daemonSet'>;
  clusterInformation: { version?: string | undefined; datastoreReady?: boolean | undefined; problem?: string | undefined; where: string };
  findings: {
    legacyFields: LegacyFields[];
    ownerReferences: string[];
    hostEndpoints: string[];
    /** Read only when upgrading from a release without a policy agent. */
    unenforcedPolicies?: UnenforcedPolicies | undefined;
  };
  /** Whether the upgrade creates the temporary policy allow-all-upgrade, and why. */
  allowAllUpgrade: AllowAllDecision;
  preflight: Check[];
  dryRun: DryRunResult[];
  steps: Step[];
  /** Of the target, the procedure and the files: what a resumed apply must be given again. */
  hash: string;
  /** What apply needs beyond the plan: the objects it applies. */
  objects: Json[];
  crds: Json[];
  helm?: { release: string; namespace: string; chart: string; version: string; binary: string; revision: number } | undefined;
}

export async function makePlan(kube: UpgradeKube, inputs: UpgradeInputs): Promise<Plan> {
  const install = await detectInstall(kube);
  const { objects, crds, helm, files } = releaseObjects(install, inputs);
  const settings = datastoreFor(install, inputs.datastore, kubeconfigPath(kube, inputs));
  const clusterInfo: ClusterInfoRead = await readClusterInformation(settings);
  const current = lowestVersion([clusterInfo.info?.netplugVersion, ...install.imageVersions]);
  const window = versionWindow(current);
  const legacyFields = (await auditFieldManagers(kube, objects)).filter((found) => found.dropped.length > 0);
  const ownerReferences = await findOwnerReferenceDescriptions(kube);
  const hostEndpoints = await allInterfacesHostEndpoints(kube);
  const upgrading = window.state === 'upgrade';
  const dryRun = upgrading ? await dryRunApply(kube, [...crds, ...objects]) : [];
  for (const found of legacyFields)
    for (const result of dryRun)
      if (describe(result.object) === describe(found.object))
        result.summary += `; then, after the field-manager migration, removed: ${found.dropped.join(', ')}`;
  const { checks, storageChanges } = await preflightChecks(kube, {
    install,
    window,
    clusterInfo,
    crds,
    dryRun,
    helm,
    nodesOnly: !upgrading,
  });
  // Only a release without a policy agent left policies unenforced: read them then.
  let unenforcedPolicies: UnenforcedPolicies | undefined;
  if (upgrading && !hasPolicyAgent(current)) {
    try {
      unenforcedPolicies = await findUnenforcedPolicies(kube, settings);
    } catch (err) {
      checks.push({
        name: 'network policies',
        ok: inputs.skipAllowAllUpgrade === true,
        detail: `cannot read the cluster's network policies to decide on allow-all-upgrade: ${(err as Error).message.split('\n')[0]}${inputs.skipAllowAllUpgrade ? ` (${SKIP_FLAG} given)` : ` (or give ${SKIP_FLAG})`}`,
      });
    }
  }
  const allowAllUpgrade = decideAllowAllUpgrade(current, unenforcedPolicies, inputs.skipAllowAllUpgrade === true);
  const blockedBy = checks.filter((c) => !c.ok).map((c) => `${c.name}: ${c.detail}`);
  const legacyObjects = legacyFields
    .map((found) => found.object)
    .filter((ref, i, all) => all.findIndex((r) => describe(r) === describe(ref)) === i);
  const steps = stepsFor({
    install,
    from: current,
    target: TARGET,
    objects: objects.map(refOf),
    crds: crds.map(refOf),
    storageChanges,
    legacyObjects,
    ownerReferences: ownerReferences.length,
    helm,
    allowAllUpgrade: allowAllUpgrade.create
      ? {
          why: allowAllUpgrade.why,
          policy: allowAllUpgradePolicy(allowAllUpgrade.order),
          order: allowAllUpgrade.order,
          operation: allowAllUpgradeOperation(settings),
        }
      : undefined,
  });
  const { daemonSet: _daemonSet, ...installSummary } = install;
  return {
    target: TARGET,
    current,
    state: window.state === 'current' ? 'current' : blockedBy.length ? 'blocked' : 'ready',
    blockedBy,
    install: installSummary,
    clusterInformation: {
      version: clusterInfo.info?.netplugVersion,
      datastoreReady: clusterInfo.info?.datastoreReady,
      problem: clusterInfo.problem,
      where: clusterInfo.where,
    },
    findings: { legacyFields, ownerReferences, hostEndpoints, unenforcedPolicies },
    allowAllUpgrade,
    preflight: checks,
    dryRun,
    steps,
    hash: sha256(
      JSON.stringify({
        target: TARGET,
        method: install.method,
        namespace: install.namespace,
        files,
        helm: helm && { ...helm, revision: 0 },
      }),
    ),
    objects,
    crds,
    helm: helm && { ...helm, binary: inputs.helmBinary },
  };
}

/** The objects and CRDs the detected procedure applies, from the files given; a usage error naming what is missing. */
function releaseObjects(install: Install, inputs: UpgradeInputs) {
  if (install.method === 'manifest') {
    if (!inputs.manifest)
      throw new UsageError(
        `netplug was installed from a manifest (DaemonSet ${install.namespace}/netplug-node): give the release's manifest with your edits, --manifest FILE (${manifestFileOf(install)})`,
      );
    const given = variantOfObjects(inputs.manifest.objects);
    const mismatch = given && variantMismatch(install, given);
    if (mismatch) throw new UsageError(`--manifest ${inputs.manifest.source}: ${mismatch}`);
    const crds = [...(inputs.crds?.objects ?? []), ...inputs.manifest.objects.filter(isCrd)];
    if (crds.length === 0) throw new UsageError("the release's CRDs are needed too: --crds FILE (crds.yaml)");
    return {
      objects: inputs.manifest.objects.filter((o) => !isCrd(o)),
      crds,
      helm: undefined,
      files: [inputs.manifest.sha256, inputs.crds?.sha256],
    };
  }
  if (!inputs.operatorCrds)
    throw new UsageError(
      `netplug was installed ${install.method === 'helm' ? 'with helm' : 'by the operator'}: give the release's operator CRDs, --operator-crds FILE (operator-crds.yaml)`,
    );
  if (install.method === 'operator') {
    const manifest = inputs.operatorManifest ?? renderedOperatorManifest();
    return {
      objects: manifest.objects.filter((o) => !isCrd(o)),
      crds: [...inputs.operatorCrds.objects.filter(isCrd), ...manifest.objects.filter(isCrd)],
      helm: undefined,
      files: [inputs.operatorCrds.sha256, manifest.sha256],
    };
  }
  if (!inputs.chart) throw new UsageError("netplug was installed with helm: give the release's chart, --chart TGZ|REPO/CHART");
  const found = install.helm;
  const release = inputs.release ?? found?.name;
  const namespace = inputs.helmNamespace ?? found?.namespace;
  if (!release || !namespace) throw new UsageError('the helm release was not found: give --release NAME and -n NAMESPACE');
  const helm = { release, namespace, chart: inputs.chart, version: TARGET.replace(/^v/, ''), revision: found?.revision ?? 0 };
  return {
    objects: [] as Json[],
    crds: inputs.operatorCrds.objects.filter(isCrd),
    helm,
    files: [inputs.operatorCrds.sha256, inputs.chart],
  };
}

function kubeconfigPath(kube: UpgradeKube, inputs: UpgradeInputs): string | undefined {
  return inputs.kubeconfig ?? kube.kubeconfigPath;
}

/** All-interfaces host endpoints not made by the controllers: `netplugctl migrate auto-host-endpoints` moves them. */
async function allInterfacesHostEndpoints(kube: UpgradeKube): Promise<string[]> {
  const heps = await kube.list('crd.projectnet.org/v1', 'HostEndpoint').catch(() => []);
  return heps
    .filter((h) => h.spec?.interfaceName === '*' && h.metadata?.labels?.['projectnet.org/created-by'] !== 'netplug-kube-controllers')
    .map((h) => h.metadata.name as string);
}
