// Installing netplug on the test cluster as a cluster operator would (README "Install on a
// cluster"): import the image, apply the CRDs and the manifest with server-side apply. The copy
// applied differs from deploy/manifests/ only where the test cluster differs from a real node:
// its CNI directories, netplug's state directory, log, agent socket (with the endpoint status
// files beside it) and containerd's pod network namespaces live in the cluster's own directory (so nothing is written to this machine's
// /opt/cni/bin, /etc/cni/net.d, /var/lib/netplug, /var/log/netplug or /var/run). The CNI
// directories move as a user moves them (one edit each, the anchored hostPath); where the agent
// mounts another host path at the same path (what the plugin's calls name), the mount moves with it.
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';

import { dumpYaml, loadAllYaml } from '@kubernetes/client-node';

import { flannelImageArchiveName, imageArchiveName } from '../../scripts/lib/image-ref.ts';
import { CLUSTER_CIDR, type Cluster } from '../helpers/cluster.ts';
import { eventually as pollUntil } from '../helpers/eventually.ts';

const ROOT = new URL('../../', import.meta.url).pathname;
export const NETPLUGCTL = join(ROOT, 'dist/bin/netplugctl');

/** flanneld's image archive for the flannel variant (npm test's pretest builds it: scripts/build-flannel-image.ts). */
export function flannelImageArchive(): string {
  const path = join(ROOT, 'dist/images', flannelImageArchiveName());
  if (!existsSync(path)) throw new Error(`${path} is missing: run npm run build:image:flannel`);
  return path;
}

/** The image archive `npm run build:image` wrote (npm test's pretest builds it). */
export function imageArchive(): string {
  const path = join(ROOT, 'dist/images', imageArchiveName());
  if (!existsSync(path)) throw new Error(`${path} is missing: run npm run build:image`);
  return path;
}

export interface NodePaths {
  varLib: string;
  logFile: string;
  /** netplug-node's CNI socket, as containerd gives it to the plugin (NETPLUG_AGENT_SOCKET). */
  agentSocket: string;
  /** containerd's pod network namespaces. */
  netnsDir: string;
}

/** What a user edits in a manifest beyond the ConfigMap's data, as docs/install.md says (dual-stack). */
interface ManifestEdits {
  /** Variables added to the netplug-node container's env (IP6, NETPLUG_IPV6POOL_CIDR ...). */
  nodeEnv?: Record<string, string>;
  /** Fields added to the ipam section of the ConfigMap's cni_network_config (assign_ipv6 ...). */
  ipam?: Record<string, string>;
}

/** The manifest with the test node's directories in place of the standard host paths (and `edits`). */
export function manifestFor(
  cluster: Cluster,
  file: 'netplug.yaml' | 'netplug-etcd.yaml' | 'netplug-policy-only.yaml' | 'netplug-flannel.yaml',
  paths: NodePaths,
  data: Record<string, string> = {},
  edits: ManifestEdits = {},
): string {
  const hostPaths: Record<string, string> = {
    '/opt/cni/bin': cluster.cniBinDir,
    '/etc/cni/net.d': cluster.cniConfDir,
    '/var/lib/netplug': paths.varLib,
    '/var/log/netplug/cni': dirname(paths.logFile),
    '/var/run/netplug': dirname(paths.agentSocket),
    '/var/run/netns': paths.netnsDir,
  };
  const moved = (path: string) => {
    for (const [from, to] of Object.entries(hostPaths))
      if (path === from || path.startsWith(`${from}/`)) return to + path.slice(from.length);
    return path;
  };
  // The CNI directories as a user moves them: each volume's anchored hostPath, edited in the text;
  // the agent's mount and install-cni's CNI_NET_DIR follow it (ts/render/host-path-anchors.ts).
  let text = readFileSync(join(ROOT, 'deploy/manifests', file), 'utf8');
  for (const [anchor, from] of [
    ['cni-bin-dir', '/opt/cni/bin'],
    ['cni-net-dir', '/etc/cni/net.d'],
  ] as const) {
    const edited = text.replaceAll(`path: &${anchor} ${from}\n`, `path: &${anchor} ${hostPaths[from]}\n`);
    if (edited === text) throw new Error(`${file} has no anchored hostPath ${anchor}`);
    text = edited;
  }
  const objects = loadAllYaml(text) as any[];
  for (const object of objects) {
    if (object.kind === 'ConfigMap' && object.metadata.name === 'netplug-config') {
      // netplug-node's endpoint status files where the plugin looks: under the moved socket's directory.
      if (object.data.endpoint_status_path_prefix) object.data.endpoint_status_path_prefix = moved(object.data.endpoint_status_path_prefix);
      Object.assign(object.data, data);
      // The ipam section as a user writes it, one field after another in the template's line.
      for (const [field, value] of Object.entries(edits.ipam ?? {})) {
        const edited = object.data.cni_network_config.replace(
          /"ipam": \{"type": "netplug-ipam"/,
          (section: string) => `${section}, ${JSON.stringify(field)}: ${JSON.stringify(value)}`,
        );
        if (edited === object.data.cni_network_config) throw new Error(`${file}'s cni_network_config has no netplug-ipam section`);
        object.data.cni_network_config = edited;
      }
      // The MTU file the agent writes for `"mtu": 0` is under the moved state directory: the
      // plugin is told where, as the operator tells it on nodes whose state directory is elsewhere.
      object.data.cni_network_config = object.data.cni_network_config
        .replace('"mtu": __CNI_MTU__,', `"mtu": __CNI_MTU__,\n      "mtu_file": "${join(paths.varLib, 'mtu')}",`)
        .replace('/var/log/netplug/cni/cni.log', paths.logFile)
        .replace('"/var/run/netplug/endpoint-status"', `"${moved('/var/run/netplug/endpoint-status')}"`);
    }
    const pod = object.spec?.template?.spec;
    if (!pod) continue;
    const hostVolumes = new Map<string, string>();
    for (const volume of pod.volumes ?? [])
      if (volume.hostPath) {
        hostVolumes.set(volume.name, volume.hostPath.path);
        volume.hostPath.path = moved(volume.hostPath.path);
      }
    for (const container of pod.containers) {
      if (container.name === 'netplug-node' && edits.nodeEnv)
        container.env = [...(container.env ?? []), ...Object.entries(edits.nodeEnv).map(([name, value]) => ({ name, value }))];
      // A host path at the same path (the agent's), and host paths in settings (CNI_NET_DIR, NETPLUG_VAR_DIR, the socket).
      for (const mount of container.volumeMounts ?? [])
        if (hostVolumes.get(mount.name) === mount.mountPath) mount.mountPath = moved(mount.mountPath);
      for (const variable of container.env ?? []) if (typeof variable.value === 'string') variable.value = moved(variable.value);
    }
  }
  const out = join(cluster.dir, `applied-${file}`);
  writeFileSync(out, objects.map((object) => `---\n${dumpYaml(object)}`).join(''));
  return out;
}

/**
 * kube-system/kubeadm-config as kubeadm writes it: where a default pool's CIDR comes from. A
 * dual-stack cluster's names both families' subnets, comma-separated (`podSubnet`, `serviceSubnet`).
 */
export async function writeKubeadmConfig(
  cluster: Cluster,
  networking: { podSubnet: string; serviceSubnet: string } = { podSubnet: CLUSTER_CIDR, serviceSubnet: '10.96.0.0/16' },
): Promise<void> {
  const file = join(cluster.dir, 'kubeadm-config.json');
  const clusterConfiguration = `apiVersion: kubeadm.k8s.io/v1beta4\nkind: ClusterConfiguration\nnetworking:\n  podSubnet: ${networking.podSubnet}\n  serviceSubnet: ${networking.serviceSubnet}\n`;
  writeFileSync(
    file,
    JSON.stringify({
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: 'kubeadm-config', namespace: 'kube-system' },
      data: { ClusterConfiguration: clusterConfiguration },
    }),
  );
  await cluster.kubectl('apply', '-f', file);
}

/** The node's netplug host paths; on a cluster of several nodes each node has its own at these paths (scripts/lib/cluster-nodes.ts). */
export function nodePaths(cluster: Cluster): NodePaths {
  const varLib = join(cluster.dir, 'var-lib-netplug');
  mkdirSync(varLib, { recursive: true });
  return {
    varLib,
    logFile: join(cluster.dir, 'var-log-netplug/cni.log'),
    agentSocket: cluster.agentSocket,
    netnsDir: cluster.netnsDir,
  };
}

/**
 * Waits until `check` holds (test/helpers/eventually.ts), for up to `seconds`: each try here is
 * usually a kubectl process, so the polls start a second apart.
 */
export async function eventually<T>(what: string, check: () => Promise<T | undefined>, seconds = 180): Promise<T> {
  return (await pollUntil(what, check, { timeoutMs: seconds * 1000, firstIntervalMs: 1000 })) as T;
}

/**
 * The WARNING and ERROR lines each container logged over a quiet spell of `seconds` from now, by
 * `namespace/pod container`. Longer than the 30 s after which client-node ends a watch that heard
 * nothing, and than the agent's route refresh (30 s) and health intervals, with a margin; not
 * longer, since every second of it is a second of CI for each install: what a component does when
 * nothing happens shows here. The agents' lines say [WARNING] or [ERROR]; the installer's and the
 * operator's, `<time> WARNING <message>`.
 */
export async function complaintsOverQuietSpell(
  cluster: Cluster,
  containers: { namespace: string; pod: string; container: string }[],
  seconds = 40,
): Promise<string[]> {
  const since = new Date().toISOString();
  await new Promise((resolve) => setTimeout(resolve, seconds * 1000));
  const complaints: string[] = [];
  for (const { namespace, pod, container } of containers) {
    const text = await cluster.kubectl('logs', '-n', namespace, pod, '-c', container, `--since-time=${since}`);
    for (const line of text.split('\n'))
      if (/\[(WARNING|ERROR)\]|^\S+ (WARNING|ERROR) /.test(line)) complaints.push(`${namespace}/${pod} ${container}: ${line}`);
  }
  return complaints;
}
