// Configuration files of the test cluster's node daemons, with the settings real-node.md found
// necessary on these machines (no CAP_SYS_RESOURCE, cgroup v1, no systemd, a shared disk), and
// every path the daemons write under the cluster's directory.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';

import type { ClusterCerts } from './cluster-certs.ts';

export interface NodeLayout {
  /** containerd's root and state are under it: the cluster's directory. */
  dir: string;
  /**
   * The node's configuration files, pod logs and volume plugins: by default `dir`; a node of a
   * cluster of several its own (whose containerd sees its own directory at `dir`/containerd).
   */
  ownDir?: string;
  containerdSocket: string;
  /** runc's state (runtime option Root): one directory per live container, named by its id. */
  runcRoot: string;
  cniBinDir: string;
  cniConfDir: string;
  sandboxImage: string;
}

export function writeContainerdConfig(node: NodeLayout): string {
  const path = join(node.ownDir ?? node.dir, 'containerd.toml');
  const cri = 'plugins."io.containerd.grpc.v1.cri"';
  writeFileSync(
    path,
    `version = 2
root = "${join(node.dir, 'containerd/root')}"
state = "${join(node.dir, 'containerd/state')}"
# Snapshotters this machine cannot use, kept from probing (and logging about) the host.
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper"]

[grpc]
  address = "${node.containerdSocket}"
[ttrpc]
  address = "${node.containerdSocket}.ttrpc"

[plugins]
  [${cri}]
    # Lowering oom_score_adj needs CAP_SYS_RESOURCE, which root here lacks (runc would fail on -998).
    restrict_oom_score_adj = true
    sandbox_image = "${node.sandboxImage}"
    # Pod network namespaces under the state directory: the cluster's stop (and the sweep of an
    # interrupted run) finds every one of them there, none mixed with other users' in /run/netns.
    netns_mounts_under_state_dir = true
    [${cri}.containerd]
      snapshotter = "overlayfs"
      default_runtime_name = "runc"
      [${cri}.containerd.runtimes.runc]
        runtime_type = "io.containerd.runc.v2"
        [${cri}.containerd.runtimes.runc.options]
          Root = "${node.runcRoot}"
          SystemdCgroup = false
    [${cri}.cni]
      bin_dir = "${node.cniBinDir}"
      conf_dir = "${node.cniConfDir}"
      max_conf_num = 1
  [plugins."io.containerd.internal.v1.opt"]
    path = "${join(node.dir, 'containerd/opt')}"
`,
  );
  return path;
}

function writeKubeletConfig(node: NodeLayout, ca: string): string {
  const own = node.ownDir ?? node.dir;
  const path = join(own, 'kubelet.yaml');
  writeFileSync(
    path,
    `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# The machine's cgroup controllers are v1; Kubernetes 1.35+ refuses them unless told.
failCgroupV1: false
cgroupDriver: cgroupfs
# No QoS cgroups: two clusters' kubelets would share /kubepods and clean up each other's pods.
cgroupsPerQOS: false
enforceNodeAllocatable: []
failSwapOn: false
oomScoreAdj: 0
containerRuntimeEndpoint: unix://${node.containerdSocket}
podLogsDir: ${join(own, 'pod-logs')}
volumePluginDir: ${join(own, 'volume-plugins')}
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: false
  x509:
    clientCAFile: ${ca}
authorization:
  mode: AlwaysAllow
# The disk is shared with everything else on the machine: never evict the test pods or images.
evictionHard:
  memory.available: 1Mi
  nodefs.available: 1%
  nodefs.inodesFree: 1%
  imagefs.available: 1%
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
`,
  );
  return path;
}

/** The kubelet's command line: `own` is the node's directory (root and certificates under it). */
export function kubeletArgs(node: NodeLayout, ca: string, kubeconfig: string, name: string, nodeIp: string): string[] {
  const own = node.ownDir ?? node.dir;
  return [
    `--config=${writeKubeletConfig(node, ca)}`,
    `--kubeconfig=${kubeconfig}`,
    `--root-dir=${join(own, 'kubelet')}`,
    // Its default /var/lib/kubelet/pki does not follow --root-dir.
    `--cert-dir=${join(own, 'kubelet-pki')}`,
    `--hostname-override=${name}`,
    `--node-ip=${nodeIp}`,
  ];
}

/** kube-proxy's command line (iptables mode, so pods and host-network pods reach the API server through the `kubernetes` Service). */
export function kubeProxyArgs(kubeconfig: string, name: string, clusterCidr: string): string[] {
  return [
    `--kubeconfig=${kubeconfig}`,
    '--proxy-mode=iptables',
    `--cluster-cidr=${clusterCidr}`,
    `--hostname-override=${name}`,
    '--healthz-bind-address=127.0.0.1:10256',
    '--metrics-bind-address=127.0.0.1:10249',
    // Zero: leave the conntrack table size and timeouts alone (the size is host-wide).
    '--conntrack-max-per-core=0',
    '--conntrack-min=0',
    '--conntrack-tcp-timeout-established=0',
    '--conntrack-tcp-timeout-close-wait=0',
  ];
}

/** kube-apiserver's command line, on the node's address and loopback. */
export function apiServerArgs(
  dir: string,
  certs: ClusterCerts,
  kubeletClient: { cert: string; key: string },
  network: { nodeIp: string; port: number; serviceCidr: string },
): string[] {
  return [
    '--etcd-servers=http://127.0.0.1:2379',
    `--secure-port=${network.port}`,
    // Needed: with only loopback and a veth there is no default-route address to pick otherwise.
    `--advertise-address=${network.nodeIp}`,
    `--tls-cert-file=${certs.serving.cert}`,
    `--tls-private-key-file=${certs.serving.key}`,
    `--client-ca-file=${certs.ca}`,
    `--service-account-key-file=${certs.serviceAccountPub}`,
    `--service-account-signing-key-file=${certs.serviceAccountKey}`,
    '--service-account-issuer=https://kubernetes.default.svc.cluster.local',
    '--authorization-mode=Node,RBAC',
    '--enable-admission-plugins=NodeRestriction',
    '--allow-privileged=true',
    `--service-cluster-ip-range=${network.serviceCidr}`,
    `--kubelet-client-certificate=${kubeletClient.cert}`,
    `--kubelet-client-key=${kubeletClient.key}`,
    // Needed for kubectl logs/exec: the default tries the node's host name first, through DNS.
    '--kubelet-preferred-address-types=InternalIP',
    `--cert-dir=${join(dir, 'apiserver')}`,
    '--profiling=false',
  ];
}

/**
 * kube-controller-manager's command line: it allocates each Node's pod CIDR (with `dualStack`, one
 * of each family: `clusterCidr` and `serviceCidr` then name both, comma-separated).
 */
export function controllerManagerArgs(
  dir: string,
  certs: ClusterCerts,
  kubeconfig: string,
  clusterCidr: string,
  serviceCidr: string,
  dualStack = false,
): string[] {
  return [
    `--kubeconfig=${kubeconfig}`,
    '--leader-elect=false',
    '--use-service-account-credentials=false',
    '--allocate-node-cidrs=true',
    `--cluster-cidr=${clusterCidr}`,
    ...(dualStack ? ['--node-cidr-mask-size-ipv4=24', '--node-cidr-mask-size-ipv6=64'] : []),
    `--service-cluster-ip-range=${serviceCidr}`,
    `--service-account-private-key-file=${certs.serviceAccountKey}`,
    `--root-ca-file=${certs.ca}`,
    // Its default creates /usr/libexec/kubernetes/kubelet-plugins.
    `--flex-volume-plugin-dir=${join(dir, 'volume-plugins')}`,
    '--bind-address=127.0.0.1',
    '--profiling=false',
  ];
}
