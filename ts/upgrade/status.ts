// `netplugctl upgrade status`: the recorded upgrade's state and each step's, every node's installed
// version (its netplug-node pod's image tag: the install record on the node is not reachable from
// here, and the pod runs what it installed) and the release its agent recorded in the datastore
// when that differs (the cluster's version is the lowest recorded), the rollout counts and the
// cluster's version.
import type { DatastoreSettings } from '../store/open.ts';
import { allowAllUpgradeExists, REVIEW_STEPS } from './allow-all-upgrade.ts';
import { datastoreFor, readClusterInformation } from './cluster-info.ts';
import type { RecordedVersion } from '../ipam/cluster-info.ts';
import { CONTROLLERS_DEPLOYMENT, detectInstall, NODE_DAEMONSET, type NodeVersion, OPERATOR_DEPLOYMENT } from './detect.ts';
import { describe, type ObjectRef, type UpgradeKube } from './kube.ts';
import { readRecord } from './record.ts';
import { rolloutOf } from './rollout.ts';

export async function upgradeStatus(kube: UpgradeKube, datastore: DatastoreSettings, json: boolean): Promise<string> {
  const install = await detectInstall(kube);
  const stored = await readRecord(kube, install.namespace);
  const settings = datastoreFor(install, datastore, kube.kubeconfigPath);
  const info = await readClusterInformation(settings, true);
  const nodes = nodeLines(install.nodes, info.nodes);
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
        nodes: nodes.map(({ text: _, ...node }) => node),
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
  for (const node of nodes) lines.push(`  ${node.text}`);
  if (nodes.length === 0) lines.push('  no netplug-node pods');
  lines.push('Rollouts');
  for (const rollout of rollouts) lines.push(`  ${rollout.object}: ${rollout.detail}${rollout.settled ? '' : ' (in progress)'}`);
  lines.push(`Cluster Version: ${clusterVersion ?? `unknown${info.problem ? ` (${info.problem})` : ''}`}`);
  if (allowAll === 'present') lines.push(`Next: ${REVIEW_STEPS}`);
  else if (allowAll) lines.push(`allow-all-upgrade: ${allowAll}`);
  return `${lines.join('\n')}\n`;
}

interface NodeLine {
  node: string;
  pod: string | null;
  version: string | null;
  ready: boolean;
  /** What its agent recorded (null: nothing); absent when the datastore could not be read. */
  recordedVersion?: string | null;
  text: string;
}

/**
 * Each node's pod and image version with the release its agent recorded (`recorded`: undefined
 * when the datastore could not be read), and nodes the datastore knows that have no pod; a line
 * names the record only when it differs from the image's version.
 */
function nodeLines(pods: readonly NodeVersion[], recorded: readonly RecordedVersion[] | undefined): NodeLine[] {
  const records = new Map((recorded ?? []).map((r) => [r.node, r.version]));
  const lines: NodeLine[] = pods.map((pod) => {
    const record = records.get(pod.node);
    const said = recorded !== undefined && record !== pod.version ? `; ${describeRecord(record)}` : '';
    return {
      ...pod,
      version: pod.version ?? null,
      ...(recorded ? { recordedVersion: record ?? null } : {}),
      text: `${pod.node}: ${pod.version ?? 'unknown'} (pod ${pod.pod}, ${pod.ready ? 'Ready' : 'not Ready'}${said})`,
    };
  });
  const withPods = new Set(pods.map((pod) => pod.node));
  for (const { node, version } of recorded ?? [])
    if (!withPods.has(node))
      lines.push({
        node,
        pod: null,
        version: null,
        ready: false,
        recordedVersion: version ?? null,
        text: `${node}: no netplug-node pod; ${describeRecord(version)}`,
      });
  return lines.sort((a, b) => a.node.localeCompare(b.node));
}

const describeRecord = (version: string | undefined) => (version ? `its agent recorded ${version}` : 'no release recorded');
