// Fixtures of the netplugctl upgrade tests on a real kube-apiserver alone (no kubelet, no
// controllers): the previous release's files as its tag holds them, installed with `kubectl
// create` as its README says (so the legacy field manager kubectl-create owns their fields),
// Node objects, and netplugctl's cluster commands run in-process.
import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';

import { previousReleaseCommit } from '../../scripts/lib/previous-release.ts';
import { runClusterCtlMain } from '../../ts/cli/cluster-commands.ts';
import { ensureClusterInfo } from '../../ts/ipam/cluster-info.ts';
import { CLUSTER_INFO_KEY } from '../../ts/model/cluster-information.ts';
import { openStore } from '../../ts/store/open.ts';
import { UpgradeKube } from '../../ts/upgrade/kube.ts';
import * as k8s from '@kubernetes/client-node';

const ROOT = new URL('../../', import.meta.url).pathname;

/** A file of the previous release's deploy/manifests, from its commit (what its build ships). */
export function previousManifest(file: string): string {
  return execFileSync('git', ['-C', ROOT, 'show', `${previousReleaseCommit()}:deploy/manifests/${file}`], {
    encoding: 'utf8',
    maxBuffer: 64 << 20,
  });
}

/** The release files of this checkout (deploy/manifests, generated from ts/render). */
export const releaseFile = (file: string) => join(ROOT, 'deploy/manifests', file);

export function kubectl(kubeconfig: string, ...args: string[]): string {
  const dir = execFileSync('sh', [join(ROOT, 'scripts/kube-binaries.sh')], {
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'inherit'],
  }).trim();
  return execFileSync(join(dir, 'kubectl'), [`--kubeconfig=${kubeconfig}`, ...args], {
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'pipe'],
  });
}

/** `kubectl create -f` of text (written to `dir` first). */
export function kubectlCreate(kubeconfig: string, dir: string, name: string, text: string): void {
  const file = join(dir, name);
  writeFileSync(file, text);
  kubectl(kubeconfig, 'create', '-f', file);
}

export interface CtlRun {
  code: number;
  out: string;
  err: string;
}

/** netplugctl's cluster commands in-process (args as after `netplugctl`). */
export async function netplugctl(args: string[], env: NodeJS.ProcessEnv = {}): Promise<CtlRun> {
  let out = '';
  let err = '';
  const code = await runClusterCtlMain(
    args,
    { PATH: process.env.PATH, HOME: '/nonexistent', ...env },
    {
      out: (text) => (out += text),
      err: (text) => (err += text),
      signal: new AbortController().signal,
    },
  );
  return { code, out, err };
}

/**
 * ClusterInformation at `version` as a node agent from before nodes recorded their release leaves
 * it (its own version, whatever the nodes record), or as the new agents leave it once every node
 * records `version`.
 */
export async function setClusterVersion(kubeconfig: string, version: string): Promise<void> {
  const store = await openStore({ datastore_type: 'kubernetes', kubernetes: { kubeconfig } });
  try {
    await ensureClusterInfo(store, version, 'k8s,kdd');
    const entry = await store.get<{ spec: Record<string, unknown> }>(CLUSTER_INFO_KEY);
    if (entry && entry.value.spec['netplugVersion'] !== version)
      await store.commit([
        { key: entry.key, update: { ...entry.value, spec: { ...entry.value.spec, netplugVersion: version } }, revision: entry.revision },
      ]);
  } finally {
    store.close();
  }
}

export function adminKube(kubeconfig: string): UpgradeKube {
  const config = new k8s.KubeConfig();
  config.loadFromFile(kubeconfig);
  return new UpgradeKube(config, kubeconfig);
}

/** A Node with a Ready condition (status written as the kubelet would). */
export async function createNode(kube: UpgradeKube, name: string, ready = true): Promise<void> {
  const ref = { apiVersion: 'v1', kind: 'Node', name };
  if (!(await kube.getOrNothing(ref)))
    await kube.create({ apiVersion: 'v1', kind: 'Node', metadata: { name, labels: { 'kubernetes.io/os': 'linux' } } });
  await kube.request(
    'PATCH',
    `/api/v1/nodes/${name}/status`,
    {
      status: {
        conditions: [
          {
            type: 'Ready',
            status: ready ? 'True' : 'False',
            reason: 'Test',
            message: 'set by the test',
            lastHeartbeatTime: new Date().toISOString(),
            lastTransitionTime: new Date().toISOString(),
          },
        ],
      },
    },
    'application/merge-patch+json',
  );
}

/** The status a settled rollout has (no controllers run on an API server alone): what the DaemonSet and Deployment controllers would write. */
export async function settleRollouts(kube: UpgradeKube, namespace: string, nodes = 1): Promise<void> {
  const ds = await kube.get({ apiVersion: 'apps/v1', kind: 'DaemonSet', name: 'netplug-node', namespace });
  await kube.request(
    'PATCH',
    `/apis/apps/v1/namespaces/${namespace}/daemonsets/netplug-node/status`,
    {
      status: {
        observedGeneration: ds.metadata.generation,
        desiredNumberScheduled: nodes,
        currentNumberScheduled: nodes,
        updatedNumberScheduled: nodes,
        numberAvailable: nodes,
        numberReady: nodes,
        numberMisscheduled: 0,
      },
    },
    'application/merge-patch+json',
  );
  const deployment = await kube.get({ apiVersion: 'apps/v1', kind: 'Deployment', name: 'netplug-kube-controllers', namespace });
  await kube.request(
    'PATCH',
    `/apis/apps/v1/namespaces/${namespace}/deployments/netplug-kube-controllers/status`,
    {
      status: {
        observedGeneration: deployment.metadata.generation,
        replicas: 1,
        updatedReplicas: 1,
        availableReplicas: 1,
        readyReplicas: 1,
      },
    },
    'application/merge-patch+json',
  );
}
