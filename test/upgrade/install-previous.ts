// Installing the previous release (v3.30.0, scripts/previous-release.sh) on a test cluster as its
// README says: `kubectl create -f` of its manifests (so the objects' fields belong to the field
// manager kubectl-create, as on clusters installed from the reference's install pages), or `helm
// install` of its chart. As test/e2e/install.ts does for this release, the files applied differ from
// the release's only where the test node differs from a real one: host paths (CNI directories,
// netplug's state, host-local's data, the legacy status directory) live in the cluster's directory.
import { execFile } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';

import { dumpYaml, loadAllYaml } from '@kubernetes/client-node';

import { type PreviousRelease, previousRelease } from '../../scripts/lib/previous-release.ts';
import { helmBinary } from '../chart/helm.ts';
import { CLUSTER_CIDR, type Cluster } from '../helpers/cluster.ts';
import { type NodePaths, writeKubeadmConfig } from '../e2e/install.ts';
import { waitAvailable } from '../e2e/operator-install.ts';

const run = promisify(execFile);

export type InstallMethod = 'manifest-kdd' | 'manifest-etcd' | 'host-local' | 'operator' | 'helm';

/** The test node's stand-ins for the host paths netplug's pods mount. */
export interface PreviousNodePaths extends NodePaths {
  /** host-local's dataDir (/var/lib/cni/networks on a real node). */
  hostLocalDir: string;
  /** v3.30's legacy status directory (/var/run/netplug-legacy). */
  legacyDir: string;
}

export interface PreviousInstall {
  method: InstallMethod;
  release: PreviousRelease;
  /** Where netplug's node and controller pods run: kube-system (manifests) or netplug-system (operator, helm). */
  namespace: 'kube-system' | 'netplug-system';
  datastore: 'kubernetes' | 'etcdv3';
  /** The files given to `kubectl create -f`, in order (none for helm). */
  files: string[];
  paths: PreviousNodePaths;
  /** netconf ConfigMap values the install set (netplug-config: etcd_endpoints on etcd); the upgrade re-applies them. */
  configData: Record<string, string>;
  /** helm's release name and namespace (helm installs). */
  helmRelease?: { name: string; namespace: string };
  /** netplugctl's datastore flags, and where it runs (on the node for etcd, which listens there). */
  netplugctlArgs: string[];
  netplugctlInNode: boolean;
}

/** Host paths of the manifests → the test node's directories. */
export function hostPathsOf(cluster: Cluster, paths: PreviousNodePaths): Record<string, string> {
  return {
    '/opt/cni/bin': cluster.cniBinDir,
    '/etc/cni/net.d': cluster.cniConfDir,
    '/var/lib/netplug': paths.varLib,
    '/var/lib/cni/networks': paths.hostLocalDir,
    '/var/run/netplug-legacy': paths.legacyDir,
    '/var/log/netplug/cni': dirname(paths.logFile),
    '/var/run/netplug': dirname(paths.agentSocket),
    '/var/run/netns': paths.netnsDir,
  };
}

export function previousNodePaths(cluster: Cluster): PreviousNodePaths {
  const paths = {
    varLib: join(cluster.dir, 'var-lib-netplug'),
    logFile: join(cluster.dir, 'var-log-netplug/cni.log'),
    agentSocket: cluster.agentSocket,
    netnsDir: cluster.netnsDir,
    hostLocalDir: join(cluster.dir, 'cni-networks'),
    legacyDir: join(cluster.dir, 'netplug-legacy'),
  };
  for (const dir of [paths.varLib, dirname(paths.logFile), paths.hostLocalDir, paths.legacyDir]) mkdirSync(dir, { recursive: true });
  return paths;
}

/**
 * A release manifest (this release's or the previous one's) with the test node's paths: hostPath
 * volumes, CNI_NET_DIR, the conflist's log file, endpoint status directory and host-local's dataDir, and `data` set in
 * netplug-config (the edits an operator makes at install time, made again at upgrade time).
 * Written to the cluster's directory as `out`; returns its path.
 */
export function manifestWithNodePaths(
  cluster: Cluster,
  source: string,
  paths: PreviousNodePaths,
  data: Record<string, string>,
  out: string,
): string {
  const hostPaths = hostPathsOf(cluster, paths);
  const objects = loadAllYaml(readFileSync(source, 'utf8')) as any[];
  for (const object of objects) {
    if (object.kind === 'ConfigMap' && object.metadata.name === 'netplug-config') {
      // This release's endpoint status files where the plugin looks: under the moved socket's directory.
      if (object.data.endpoint_status_path_prefix) object.data.endpoint_status_path_prefix = dirname(paths.agentSocket);
      Object.assign(object.data, data);
      object.data.cni_network_config = object.data.cni_network_config
        .replace('/var/log/netplug/cni/cni.log', paths.logFile)
        .replace('"/var/run/netplug/endpoint-status"', `"${dirname(paths.agentSocket)}/endpoint-status"`)
        .replace('"subnet": "usePodCidr"', `"subnet": "usePodCidr", "dataDir": "${paths.hostLocalDir}"`);
    }
    const pod = object.spec?.template?.spec;
    if (!pod) continue;
    const hostVolumes = new Map<string, string>();
    for (const volume of pod.volumes ?? [])
      if (volume.hostPath) {
        hostVolumes.set(volume.name, volume.hostPath.path);
        volume.hostPath.path = hostPaths[volume.hostPath.path] ?? volume.hostPath.path;
      }
    for (const container of [...(pod.initContainers ?? []), ...pod.containers]) {
      for (const variable of container.env ?? []) if (variable.name === 'CNI_NET_DIR') variable.value = cluster.cniConfDir;
      // netplug-node's mounts at the host path (what the plugin's calls name) move with it, and its settings naming them.
      for (const mount of container.volumeMounts ?? [])
        if (hostVolumes.get(mount.name) === mount.mountPath) mount.mountPath = hostPaths[mount.mountPath] ?? mount.mountPath;
      for (const variable of container.env ?? []) {
        if (variable.name === 'NETPLUG_VAR_DIR') variable.value = hostPaths[variable.value] ?? variable.value;
        if (variable.name === 'NETPLUG_AGENT_SOCKET') variable.value = paths.agentSocket;
      }
    }
  }
  const path = join(cluster.dir, out);
  writeFileSync(path, objects.map((object) => `---\n${dumpYaml(object)}`).join(''));
  return path;
}

/** The operator's manifest with the node layout of the test cluster (NETPLUG_NODE_STATE_DIR, NETPLUG_CNI_LOG_FILE). */
export function operatorManifestWithNodePaths(cluster: Cluster, source: string, paths: NodePaths, out: string): string {
  const objects = loadAllYaml(readFileSync(source, 'utf8')) as any[];
  for (const object of objects)
    for (const container of object.spec?.template?.spec?.containers ?? [])
      for (const variable of container.env ?? []) {
        if (variable.name === 'NETPLUG_NODE_STATE_DIR') variable.value = paths.varLib;
        if (variable.name === 'NETPLUG_CNI_LOG_FILE') variable.value = paths.logFile;
        if (variable.name === 'NETPLUG_AGENT_SOCKET') variable.value = paths.agentSocket;
        if (variable.name === 'NETPLUG_NETNS_DIR') variable.value = paths.netnsDir;
      }
  const path = join(cluster.dir, out);
  writeFileSync(path, objects.map((object) => `---\n${dumpYaml(object)}`).join(''));
  return path;
}

/** An Installation file with the test cluster's CNI directories, its pool's CIDR set to the cluster's pod network (as the README says to). */
function customResourcesForCluster(cluster: Cluster, source: string, out: string): string {
  const objects = loadAllYaml(readFileSync(source, 'utf8')) as any[];
  for (const object of objects) {
    if (object.kind !== 'Installation') continue;
    object.spec.cni = { ...object.spec.cni, binDir: cluster.cniBinDir, confDir: cluster.cniConfDir };
    for (const pool of object.spec.calicoNetwork?.ipPools ?? []) pool.cidr = CLUSTER_CIDR;
  }
  const path = join(cluster.dir, out);
  writeFileSync(path, objects.map((object) => `---\n${dumpYaml(object)}`).join(''));
  return path;
}

/** helm with its homes in the cluster's directory (removed with it), against the cluster. */
export function helmFor(cluster: Cluster): (...args: string[]) => Promise<string> {
  const home = join(cluster.dir, 'helm-home');
  const env = {
    PATH: process.env['PATH'] ?? '/usr/bin:/bin',
    HOME: home,
    HELM_CACHE_HOME: join(home, 'cache'),
    HELM_CONFIG_HOME: join(home, 'config'),
    HELM_DATA_HOME: join(home, 'data'),
    KUBECONFIG: cluster.kubeconfig,
  };
  const binary = helmBinary();
  return async (...args) => (await run(binary, args, { env, encoding: 'utf8' })).stdout;
}

/** `kubectl rollout status` of netplug's node DaemonSet and controllers Deployment (the README's wait). */
export async function waitRolledOut(cluster: Cluster, namespace: string, timeoutSeconds = 300): Promise<void> {
  await cluster.kubectl('-n', namespace, 'rollout', 'status', 'daemonset/netplug-node', `--timeout=${timeoutSeconds}s`);
  await cluster.kubectl('-n', namespace, 'rollout', 'status', 'deployment/netplug-kube-controllers', `--timeout=${timeoutSeconds}s`);
}

const MANIFEST: Record<'manifest-kdd' | 'manifest-etcd' | 'host-local', string> = {
  'manifest-kdd': 'netplug.yaml',
  'manifest-etcd': 'netplug-etcd.yaml',
  'host-local': 'netplug-host-local.yaml',
};

/** Installs v3.30.0 by `method` as its README says, and waits until it is ready. */
export async function installPrevious(cluster: Cluster, method: InstallMethod): Promise<PreviousInstall> {
  const release = previousRelease();
  await cluster.importImage(release.imageArchive);
  await writeKubeadmConfig(cluster);
  const paths = previousNodePaths(cluster);
  const create = async (file: string) => {
    await cluster.kubectl('create', '-f', file);
    return file;
  };
  if (method === 'operator' || method === 'helm') {
    const files: string[] = [];
    let helmRelease: PreviousInstall['helmRelease'];
    if (method === 'operator') {
      files.push(await create(join(release.manifests, 'operator-crds.yaml')));
      await cluster.kubectl('wait', '--for=condition=Established', 'crd', '--all', '--timeout=60s');
      files.push(
        await create(
          operatorManifestWithNodePaths(cluster, join(release.manifests, 'netplug-operator.yaml'), paths, 'v3.30.0-netplug-operator.yaml'),
        ),
      );
      files.push(
        await create(customResourcesForCluster(cluster, join(release.manifests, 'custom-resources.yaml'), 'v3.30.0-custom-resources.yaml')),
      );
    } else {
      helmRelease = { name: 'netplug', namespace: 'netplug-operator' };
      await helmFor(cluster)(
        'install',
        helmRelease.name,
        release.chart,
        '-n',
        helmRelease.namespace,
        '--create-namespace',
        '--set',
        `node.stateDir=${paths.varLib},node.cniLogFile=${paths.logFile},node.agentSocket=${paths.agentSocket},node.netnsDir=${paths.netnsDir}`,
        '--set-json',
        `installation.spec=${JSON.stringify({
          calicoNetwork: { ipPools: [{ cidr: CLUSTER_CIDR }] },
          cni: { binDir: cluster.cniBinDir, confDir: cluster.cniConfDir },
        })}`,
      );
    }
    await waitAvailable(cluster, 300);
    await waitRolledOut(cluster, 'netplug-system');
    return {
      method,
      release,
      namespace: 'netplug-system',
      datastore: 'kubernetes',
      files,
      paths,
      configData: {},
      ...(helmRelease ? { helmRelease } : {}),
      netplugctlArgs: ['--kubeconfig', cluster.kubeconfig],
      netplugctlInNode: false,
    };
  }
  const etcd = method === 'manifest-etcd';
  const configData: Record<string, string> = etcd ? { etcd_endpoints: `http://${cluster.nodeIp}:2379` } : {};
  const manifest = manifestWithNodePaths(
    cluster,
    join(release.manifests, MANIFEST[method]),
    paths,
    configData,
    `v3.30.0-${MANIFEST[method]}`,
  );
  const files = [await create(join(release.manifests, 'crds.yaml'))];
  await cluster.kubectl('wait', '--for=condition=Established', 'crd', '--all', '--timeout=60s');
  files.push(await create(manifest));
  await waitRolledOut(cluster, 'kube-system');
  return {
    method,
    release,
    namespace: 'kube-system',
    datastore: etcd ? 'etcdv3' : 'kubernetes',
    files,
    paths,
    configData,
    netplugctlArgs: etcd ? ['--etcd-endpoints', 'http://127.0.0.1:2379'] : ['--kubeconfig', cluster.kubeconfig],
    netplugctlInNode: etcd,
  };
}

/** Runs a netplugctl (this release's or the previous one's) against the install's datastore; resolves to its stdout. */
export async function runNetplugctl(cluster: Cluster, installed: PreviousInstall, binary: string, ...args: string[]): Promise<string> {
  if (installed.netplugctlInNode) return cluster.inNode(binary, [...installed.netplugctlArgs, ...args]);
  return (await run(binary, [...installed.netplugctlArgs, ...args], { encoding: 'utf8' })).stdout;
}
