// `netplugctl upgrade status`: the recorded upgrade's state and each step's, every node's installed
// version (its netplug-node pod's image tag: the install record on the node is not reachable from
// here, and the pod runs what it installed), the rollout counts and the cluster's version.
import type { DatastoreSettings } from '../store/open.ts';
import { allowAllUpgradeExists, REVIEW_STEPS } from './allow-all-upgrade.ts';
import { datastoreFor, readClusterInformation } from './cluster-info.ts';
import { CONTROLLERS_DEPLOYMENT, detectInstall, NODE_DAEMONSET, OPERATOR_DEPLOYMENT } from './detect.ts';
import { describe, type ObjectRef, type UpgradeKube } from './kube.ts';
import { readRecord } from './record.ts';
import { rolloutOf } from './rollout.ts';

export async function upgradeStatus(kube: UpgradeKube, datastore: DatastoreSettings, json: boolean): Promise<string> {
  const install = await detectInstall(kube);
  const stored = await readRecord(kube, install.namespace);
  const settings = datastoreFor(install, datastore, kube.kubeconfigPath);
  const info = await readClusterInformation(settings);
  const workloads: ObjectRef[] = [
    ...(install.operatorNamespace
      ? [{ apiVersion: 'apps/v1', kind: 'Deployment', name: OPERATOR_DEPLOYMENT, namespace: install.operatorNamespace }]
      : []),
    { apiVersion: 'apps/v1', kind: 'DaemonSet', name: NODE_DAEMONSET, namespace: install.namespace },
    { apiVersion: 'apps/v1', kind: 'Deployment', name: CONTROLLERS_DEPLOYMENT, namespace: install.namespace },
  ];
  const rollouts = [];
  for (const ref of workloads) {
    const object = await kube.getOrNothing(ref);
    if (object) rollouts.push({ object: describe(ref), ...rolloutOf(object) });
  }
  const record = stored?.record;
  const steps = (record?.steps ?? []).map((step, i) => ({ n: i + 1, id: step.id, title: step.title, ...record?.progress[step.id] }));
  const clusterVersion = info.info?.netplugVersion;
  // The step the administrator still has to take (docs/upgrade.md), for as long as the policy is there.
  const allowAll =
    record?.progress['allow-all-upgrade']?.state === 'done'
      ? await allowAllUpgradeExists(settings).then(
          (present) => (present ? 'present' : 'deleted'),
          (err: Error) => `unknown (${err.message.split('\n')[0]})`,
        )
      : undefined;
  if (json)
    return `${JSON.stringify(
      {
        upgrade: record
          ? {
              from: record.from,
              target: record.target,
              method: record.method,
              state: record.state,
              current: record.current,
              message: record.message,
              startedAt: record.startedAt,
              steps,
            }
          : null,
        nodes: install.nodes,
        rollouts,
        clusterVersion: clusterVersion ?? null,
        ...(allowAll ? { allowAllUpgrade: allowAll } : {}),
        ...(info.problem ? { clusterVersionProblem: info.problem } : {}),
      },
      null,
      2,
    )}\n`;
  const lines: string[] = [];
  if (!record) lines.push(`No upgrade recorded (no ConfigMap ${install.namespace}/netplug-upgrade).`);
  else {
    const at = record.current ? `, step ${steps.findIndex((s) => s.id === record.current) + 1}/${steps.length} ${record.current}` : '';
    lines.push(
      `Upgrade ${record.from} → ${record.target} (${record.method} install in ${install.namespace}), started ${record.startedAt}: ${record.state}${at}`,
    );
    if (record.message) lines.push(`  ${record.message}`);
    for (const step of steps)
      lines.push(
        `  ${String(step.n).padStart(2)}. ${(step.state ?? 'pending').padEnd(11)} ${step.id}${step.message ? `: ${step.message}` : ''}`,
      );
  }
  lines.push('Nodes');
  for (const node of install.nodes)
    lines.push(`  ${node.node}: ${node.version ?? 'unknown'} (pod ${node.pod}, ${node.ready ? 'Ready' : 'not Ready'})`);
  if (install.nodes.length === 0) lines.push('  no netplug-node pods');
  lines.push('Rollouts');
  for (const rollout of rollouts) lines.push(`  ${rollout.object}: ${rollout.detail}${rollout.settled ? '' : ' (in progress)'}`);
  lines.push(`Cluster Version: ${clusterVersion ?? `unknown${info.problem ? ` (${info.problem})` : ''}`}`);
  if (allowAll === 'present') lines.push(`Next: ${REVIEW_STEPS}`);
  else if (allowAll) lines.push(`allow-all-upgrade: ${allowAll}`);
  return `${lines.join('\n')}\n`;
}
