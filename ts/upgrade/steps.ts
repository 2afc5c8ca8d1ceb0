// The ordered steps of each procedure (the spec's "Upgrade: ..." sections, with the extra steps
// netplugctl upgrade adds), each with the API operations behind it and what a rollback
// can do about it. Steps are data: the plan prints them, apply records and runs them by id.
import type { Install } from './detect.ts';
import { describe, type ObjectRef } from './kube.ts';
import { recordsNodeVersion, versionRecordsPlace } from './version-records.ts';

type StepId =
  | 'strip-owner-references'
  | 'host-local'
  | 'migrate-field-managers'
  | 'apply-crds'
  | 'allow-all-upgrade'
  | 'apply-manifest'
  | 'apply-operator'
  | 'helm-upgrade'
  | 'wait-rollout'
  | 'restore-owner-references'
  | 'check-version'
  | 'node-version-records';

/**
 * restore: rollback puts the saved objects back; keep: left as it is (saying why); one-way: rollback
 * refuses; delete-created: rollback deletes what the step created (a datastore document, which the
 * saved Kubernetes objects cannot stand for on etcd); remove-version-records: rollback removes every
 * node's recorded release once the previous release runs (version-records.ts).
 */
type RollbackKind = 'restore' | 'keep' | 'one-way' | 'helm-rollback' | 'delete-created' | 'remove-version-records';

export interface Step {
  id: StepId;
  title: string;
  operations: string[];
  rollback: RollbackKind;
  /** Why a step is kept or one-way. */
  why?: string;
  /** The objects the step changes, saved before it does (restore). */
  objects?: ObjectRef[];
  /** The policy document the step writes (allow-all-upgrade), kept in the record for a resumed apply. */
  policy?: object;
}

export interface StepInputs {
  install: Install;
  /** The release the cluster runs (undefined: not known). */
  from: string | undefined;
  target: string;
  /** The objects the procedure applies, CRDs apart, in order. */
  objects: ObjectRef[];
  crds: ObjectRef[];
  /** CRDs whose storage version changes (rollback cannot undo what is stored in the new version). */
  storageChanges: string[];
  /** Objects whose legacy managers own fields the new objects drop. */
  legacyObjects: ObjectRef[];
  ownerReferences: number;
  helm?: { release: string; namespace: string; chart: string; version: string } | undefined;
  /** The temporary policy, when the upgrade needs it (allow-all-upgrade.ts): why, the document, the write. */
  allowAllUpgrade?: { why: string; policy: object; order: number; operation: string } | undefined;
}

const ssa = (ref: ObjectRef) => `PATCH ${describe(ref)} (server-side apply, fieldManager=netplugctl, force=true)`;

export function stepsFor(inputs: StepInputs): Step[] {
  const { install } = inputs;
  const steps: Step[] = [];
  if (inputs.ownerReferences > 0)
    steps.push({
      id: 'strip-owner-references',
      title: `Record and remove ${inputs.ownerReferences} owner reference(s) to netplug resources (the spec's "Owner references" step 1)`,
      operations: [
        'PATCH ConfigMap kube-system/netplug-owner-references (merge: the references, before any object changes)',
        'PATCH <each dependent> (JSON patch: test the reference uid, remove /metadata/ownerReferences/<i>)',
      ],
      rollback: 'keep',
      why: 'the references are put back, with the owners’ current UIDs, by the restore step (or `netplugctl migrate owner-references --restore`)',
    });
  if (install.method === 'manifest' && install.ipam === 'host-local' && (install.upgradeIpam || !install.usePodCidr)) {
    const ds = { apiVersion: 'apps/v1', kind: 'DaemonSet', name: 'netplug-node', namespace: install.namespace };
    steps.push({
      id: 'host-local',
      title: 'Host-local install: USE_POD_CIDR=true on netplug-node, the init container upgrade-ipam removed from the live DaemonSet',
      operations: [
        `PATCH ${describe(ds)} (one JSON patch: test the resourceVersion and the names at the indexes it changes${install.upgradeIpam ? ', remove the init container upgrade-ipam' : ''}${install.usePodCidr ? '' : ', add env USE_POD_CIDR=true to netplug-node'})`,
      ],
      rollback: 'restore',
      objects: [ds],
    });
  }
  if (inputs.legacyObjects.length > 0)
    steps.push({
      id: 'migrate-field-managers',
      title: `Move fields owned by kubectl-create/kubectl-client-side-apply/kubectl-edit to netplugctl on ${inputs.legacyObjects.length} object(s), so the apply prunes what the release dropped`,
      operations: inputs.legacyObjects.map(
        (ref) => `PATCH ${describe(ref)} (JSON patch: test /metadata/resourceVersion, replace /metadata/managedFields)`,
      ),
      rollback: 'keep',
      why: 'only which manager owns the fields changed; the restore of the saved objects puts their values back',
      objects: inputs.legacyObjects,
    });
  if (inputs.crds.length > 0)
    steps.push({
      id: 'apply-crds',
      title: `Apply the release's ${inputs.crds.length} CRDs (server-side apply, force-conflicts; CRDs first)`,
      operations: inputs.crds.map(ssa),
      ...(inputs.storageChanges.length
        ? {
            rollback: 'one-way' as const,
            why: `the storage version of ${inputs.storageChanges.join(', ')} changes: objects written after it are stored in the new version, which the previous release cannot read`,
          }
        : {
            rollback: 'keep' as const,
            why: 'the new CRDs serve every version the previous release uses; taking fields out of a schema could prune stored data',
          }),
    });
  // Before this release's netplug-node starts anywhere: its first rules already let everything through.
  if (inputs.allowAllUpgrade)
    steps.push({
      id: 'allow-all-upgrade',
      title: `Create GlobalNetworkPolicy allow-all-upgrade (every endpoint, ingress and egress: Log, then Allow; tier default, order ${inputs.allowAllUpgrade.order}, before every other policy there): ${inputs.allowAllUpgrade.why}`,
      operations: [inputs.allowAllUpgrade.operation],
      rollback: 'delete-created',
      why: 'rollback deletes it when the upgrade created it',
      policy: inputs.allowAllUpgrade.policy,
    });
  if (install.method === 'manifest')
    steps.push({
      id: 'apply-manifest',
      title: `Apply the release manifest (${inputs.objects.length} objects; starts the rolling update of netplug-node)`,
      operations: inputs.objects.map(ssa),
      rollback: 'restore',
      objects: inputs.objects,
    });
  if (install.method === 'operator')
    steps.push({
      id: 'apply-operator',
      title: `Apply the release's operator manifest (${inputs.objects.length} objects; the new operator re-renders netplug-system)`,
      operations: inputs.objects.map(ssa),
      rollback: 'restore',
      objects: inputs.objects,
    });
  if (install.method === 'helm' && inputs.helm)
    steps.push({
      id: 'helm-upgrade',
      title: `helm upgrade ${inputs.helm.release} ${inputs.helm.chart} -n ${inputs.helm.namespace} --version ${inputs.helm.version}`,
      operations: [
        `LIST Secrets -n ${inputs.helm.namespace} -l owner=helm,name=${inputs.helm.release}`,
        `CREATE Secret sh.helm.release.v1.${inputs.helm.release}.v<N+1>; three-way PATCH of each chart object; mark v<N> superseded`,
      ],
      rollback: 'helm-rollback',
      why: 'helm rollback to the release revision recorded before the upgrade',
    });
  const workloads =
    install.method === 'manifest'
      ? [`DaemonSet ${install.namespace}/netplug-node`, `Deployment ${install.namespace}/netplug-kube-controllers`]
      : [
          `Deployment ${install.operatorNamespace ?? 'netplug-operator'}/netplug-operator`,
          'Installation default status.netplugVersion, NetplugStatus netplug Available',
          `DaemonSet ${install.namespace}/netplug-node`,
          `Deployment ${install.namespace}/netplug-kube-controllers`,
        ];
  steps.push({
    id: 'wait-rollout',
    title: `Wait for the rollout: ${workloads.join(', ')}`,
    operations: [
      ...workloads.map((w) => `GET ${w} (observedGeneration, updated and available counts)`),
      `LIST Pods -n ${install.namespace} -l k8s-app=netplug-node (every container Ready, image ${inputs.target})`,
    ],
    rollback: 'keep',
    why: 'waits only',
  });
  if (inputs.ownerReferences > 0)
    steps.push({
      id: 'restore-owner-references',
      title: 'Restore the recorded owner references with the owners’ current UIDs (the spec’s step 3)',
      operations: [
        'GET <each owner>',
        'PATCH <each dependent> (JSON patch: add /metadata/ownerReferences/-)',
        'PATCH ConfigMap kube-system/netplug-owner-references',
      ],
      rollback: 'keep',
      why: 'the references stay, naming owners that exist',
    });
  steps.push({
    id: 'check-version',
    title: `Check the version: ClusterInformation default says ${inputs.target} and every node runs it`,
    operations: [
      install.datastore === 'kubernetes'
        ? 'GET ClusterInformation default (crd.projectnet.org/v1)'
        : 'GET /netplug/resources/v3/projectnet.org/clusterinformations/default (etcd)',
      `LIST Pods -n ${install.namespace} -l k8s-app=netplug-node`,
    ],
    rollback: 'keep',
    why: 'reads only',
  });
  if (!recordsNodeVersion(inputs.from)) {
    const place = versionRecordsPlace(install.datastore);
    steps.push({
      id: 'node-version-records',
      title: `Read the release each node records (its netplug-node records it as it starts; ${inputs.from ?? 'the release that runs'} records none)`,
      operations: [place.read],
      rollback: 'remove-version-records',
      why: `once ${inputs.from ?? 'the previous release'} runs on every node again, rollback removes every node's record (${place.remove}): that release would leave them saying ${inputs.target}`,
    });
  }
  return steps;
}
