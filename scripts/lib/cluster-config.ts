// Configuration files of the test cluster's node daemons, with the settings real-node.md found
// necessary on these machines (no CAP_SYS_RESOURCE, cgroup v1, no systemd, a shared disk), and
// every path the daemons write under the cluster's directory.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';

export interface NodeLayout {
  dir: string;
  containerdSocket: string;
  /** runc's state (runtime option Root): one directory per live container, named by its id. */
  runcRoot: string;
  cniBinDir: string;
  cniConfDir: string;
  sandboxImage: string;
}

export function writeContainerdConfig(node: NodeLayout): string {
  const path = join(node.dir, 'containerd.toml');
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

export function writeKubeletConfig(node: NodeLayout, ca: string): string {
  const path = join(node.dir, 'kubelet.yaml');
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
podLogsDir: ${join(node.dir, 'pod-logs')}
volumePluginDir: ${join(node.dir, 'volume-plugins')}
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
