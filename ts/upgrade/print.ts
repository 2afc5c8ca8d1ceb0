// The plan as text (for people) and as JSON (-o json, for scripts): what is installed, what was
// found, the preflight, the dry run, and the ordered steps with their API operations.
import { dryRunLine } from './dry-run.ts';
import { describe } from './kube.ts';
import type { Plan } from './plan.ts';
import { manifestFileOf } from './variant.ts';

const ROLLBACK: Record<string, string> = {
  restore: 'reversible (rollback restores the saved objects)',
  'helm-rollback': 'reversible (helm rollback)',
  keep: 'kept on rollback',
  'one-way': 'ONE-WAY (rollback refuses)',
  'delete-created': 'reversible',
  'remove-version-records': 'undone on rollback',
};

export function formatPlan(plan: Plan): string {
  const { install } = plan;
  const lines: string[] = [];
  lines.push(`netplug upgrade plan: ${plan.current ?? 'unknown version'} → ${plan.target}`);
  lines.push('');
  lines.push('Install');
  lines.push(
    `  method: ${install.method}${install.helm ? ` (helm release ${install.helm.namespace}/${install.helm.name}, revision ${install.helm.revision}, chart ${install.helm.chartVersion}, ${install.helm.status})` : ''}${install.operatorNamespace && !install.helm ? ` (operator in ${install.operatorNamespace})` : ''}`,
  );
  lines.push(`  namespace: ${install.namespace}`);
  if (install.method === 'manifest')
    lines.push(
      `  manifest: ${manifestFileOf(install)} (${install.networking === 'none' ? 'policy only' : `${install.networking} routes pods between nodes`})`,
    );
  lines.push(`  datastore: ${install.datastore}${install.etcdEndpoints ? ` (${install.etcdEndpoints})` : ''}`);
  lines.push(
    `  IPAM: ${install.ipam}${install.usePodCidr ? ', USE_POD_CIDR=true' : ''}; init container upgrade-ipam: ${install.upgradeIpam ? 'present' : 'absent'}`,
  );
  lines.push(
    `  cluster version: ${plan.clusterInformation.version ?? `unknown${plan.clusterInformation.problem ? ` (${plan.clusterInformation.problem})` : ''}`} (ClusterInformation, ${plan.clusterInformation.where}); images: ${install.imageVersions.join(', ') || 'none versioned'}`,
  );
  for (const node of install.nodes)
    lines.push(`  node ${node.node}: ${node.version ?? 'unknown'}${node.ready ? '' : ' (not Ready)'} (pod ${node.pod})`);
  lines.push('');
  lines.push('Found');
  const legacy = plan.findings.legacyFields;
  lines.push(
    `  fields the new release drops, owned by legacy field managers (they would survive a plain server-side apply): ${legacy.length ? '' : 'none'}`,
  );
  for (const found of legacy) lines.push(`    ${describe(found.object)} (${found.manager}): ${found.dropped.join(', ')}`);
  lines.push(`  owner references to netplug's API groups: ${plan.findings.ownerReferences.length ? '' : 'none'}`);
  for (const reference of plan.findings.ownerReferences) lines.push(`    ${reference}`);
  lines.push(
    `  all-interfaces host endpoints: ${plan.findings.hostEndpoints.length ? `${plan.findings.hostEndpoints.join(', ')} (not part of the upgrade: netplugctl migrate auto-host-endpoints)` : 'none'}`,
  );
  const policies = plan.findings.unenforcedPolicies;
  if (policies) {
    const names = [
      ...policies.kubernetes.map((name) => `NetworkPolicy ${name}`),
      ...policies.netplug,
      ...policies.hostEndpoints.map((name) => `HostEndpoint ${name}`),
    ];
    lines.push(`  network policies and host endpoints ${plan.current} did not enforce: ${names.length ? names.join(', ') : 'none'}`);
  }
  lines.push(
    `  allow-all-upgrade: ${plan.allowAllUpgrade.create ? 'created before the new netplug-node starts' : 'not needed'} (${plan.allowAllUpgrade.why})`,
  );
  lines.push('');
  lines.push('Preflight');
  for (const check of plan.preflight) lines.push(`  ${check.ok ? 'ok     ' : 'BLOCKED'} ${check.name}: ${check.detail}`);
  if (plan.dryRun.length) {
    lines.push('');
    lines.push('Server-side dry run (dryRun=All, fieldManager=netplugctl, force=true)');
    for (const result of plan.dryRun) lines.push(`  ${dryRunLine(result)}`);
  }
  if (plan.state !== 'current') {
    lines.push('');
    lines.push('Steps');
    for (const [i, step] of plan.steps.entries()) {
      lines.push(`  ${i + 1}. ${step.title} [${ROLLBACK[step.rollback]}${step.why && step.rollback !== 'restore' ? `: ${step.why}` : ''}]`);
      for (const operation of step.operations) lines.push(`       ${operation}`);
    }
  }
  lines.push('');
  lines.push(
    plan.state === 'ready'
      ? 'Ready: netplugctl upgrade apply --yes (with the same flags) performs these steps.'
      : plan.state === 'current'
        ? `Nothing to do: the cluster runs ${plan.current}.`
        : `Blocked: ${plan.blockedBy.join('; ')}`,
  );
  return `${lines.join('\n')}\n`;
}

/** -o json: the plan without the objects it would apply (they are the files given). */
export function planJson(plan: Plan): string {
  const { objects: _objects, crds: _crds, ...rest } = plan;
  return `${JSON.stringify(rest, null, 2)}\n`;
}
