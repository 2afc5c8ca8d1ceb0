// Installing netplug on the test cluster as a cluster operator would (README "Install on a
// cluster"): import the image, apply the CRDs and the manifest with server-side apply. The copy
// applied differs from deploy/manifests/ only where the test cluster differs from a real node:
// its CNI directories, netplug's state directory and log file live in the cluster's own directory
// (so nothing is written to this machine's /opt/cni/bin, /etc/cni/net.d or /var/lib/netplug).
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

import { dumpYaml, loadAllYaml } from '@kubernetes/client-node';

import { imageArchiveName } from '../../scripts/lib/image-ref.ts';
import { CLUSTER_CIDR, type Cluster } from '../helpers/cluster.ts';

const ROOT = new URL('../../', import.meta.url).pathname;
export const NETPLUGCTL = join(ROOT, 'dist/bin/netplugctl');

/** The image archive `npm run build:image` wrote (npm test's pretest builds it). */
export function imageArchive(): string {
  const path = join(ROOT, 'dist/images', imageArchiveName());
  if (!existsSync(path)) throw new Error(`${path} is missing: run npm run build:image`);
  return path;
}

export interface NodePaths {
  varLib: string;
  logFile: string;
}

/** The manifest with the test node's directories in place of the standard host paths. */
export function manifestFor(
  cluster: Cluster,
  file: 'netplug.yaml' | 'netplug-etcd.yaml',
  paths: NodePaths,
  data: Record<string, string> = {},
): string {
  const hostPaths: Record<string, string> = {
    '/opt/cni/bin': cluster.cniBinDir,
    '/etc/cni/net.d': cluster.cniConfDir,
    '/var/lib/netplug': paths.varLib,
  };
  const objects = loadAllYaml(readFileSync(join(ROOT, 'deploy/manifests', file), 'utf8')) as any[];
  for (const object of objects) {
    if (object.kind === 'ConfigMap' && object.metadata.name === 'netplug-config') {
      Object.assign(object.data, data);
      object.data.cni_network_config = object.data.cni_network_config.replace('/var/log/netplug/cni/cni.log', paths.logFile);
    }
    const pod = object.spec?.template?.spec;
    if (!pod) continue;
    for (const volume of pod.volumes ?? [])
      if (volume.hostPath) volume.hostPath.path = hostPaths[volume.hostPath.path] ?? volume.hostPath.path;
    for (const container of pod.containers)
      for (const variable of container.env ?? []) if (variable.name === 'CNI_NET_DIR') variable.value = cluster.cniConfDir;
  }
  const out = join(cluster.dir, `applied-${file}`);
  writeFileSync(out, objects.map((object) => `---\n${dumpYaml(object)}`).join(''));
  return out;
}

/** kube-system/kubeadm-config as kubeadm writes it: where a default pool's CIDR comes from. */
export async function writeKubeadmConfig(cluster: Cluster): Promise<void> {
  const file = join(cluster.dir, 'kubeadm-config.json');
  const clusterConfiguration = `apiVersion: kubeadm.k8s.io/v1beta4\nkind: ClusterConfiguration\nnetworking:\n  podSubnet: ${CLUSTER_CIDR}\n  serviceSubnet: 10.96.0.0/16\n`;
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

export function nodePaths(cluster: Cluster): NodePaths {
  const varLib = join(cluster.dir, 'var-lib-netplug');
  mkdirSync(varLib, { recursive: true });
  return { varLib, logFile: join(cluster.dir, 'netplug-cni.log') };
}

/** Waits until `check` holds, polling; the last failure's message if it never does. */
export async function eventually<T>(what: string, check: () => Promise<T | undefined>, seconds = 180): Promise<T> {
  const deadline = Date.now() + seconds * 1000;
  let last = '';
  for (;;) {
    try {
      const value = await check();
      if (value !== undefined && value !== false) return value;
    } catch (err) {
      last = err instanceof Error ? err.message : String(err);
    }
    if (Date.now() > deadline) throw new Error(`gave up waiting for ${what}${last ? `: ${last}` : ''}`);
    await new Promise((resolve) => setTimeout(resolve, 1000));
  }
}
