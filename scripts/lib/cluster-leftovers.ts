// Removes everything a test cluster made, whether it is still running or its owner died mid-run:
// its processes (found by the directory on their command lines), its containers (runc, which
// also removes their cgroups), the mounts under its directory (the kubelet's rshared bind of its
// root, pod volumes, rootfs overlays, pod network namespaces; those of the other nodes of a
// cluster of several are in their own mount namespaces, which go with their last process), its
// network namespaces (every node's, the router's) with every link, route and iptables rule in
// them, the few host paths the kubelet and containerd write where no setting moves them, and the
// directory. Run as a program it sweeps the clusters of test
// processes that are gone (scripts/sweep-test-leftovers.sh).
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, readlinkSync, rmdirSync, rmSync, unlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';

import { alive, processesNaming, terminate } from './cluster-processes.ts';

/** Cluster directories and network namespaces are named npcluster-<owner pid>-<random>. */
export const CLUSTER_PREFIX = 'npcluster-';

/** The runc state root containerd is given (cluster-config.ts), under the cluster directory. */
export const runcRootOf = (dir: string) => join(dir, 'containerd/runc');

/**
 * The directory of a node besides the first in a cluster of several (cluster-nodes.ts): its
 * configuration and kubelet, its runc state, and under shadow/ what its mount namespace shows
 * at the cluster's own host paths (shadow/containerd at <dir>/containerd, and so on).
 */
export function workerLayout(dir: string, name: string): { root: string; shadow: string; runcRoot: string } {
  const root = join(dir, 'nodes', name);
  return { root, shadow: join(root, 'shadow'), runcRoot: join(root, 'runc') };
}

/** Each node's containerd directory and runc root, as seen from here: the first node's, then the others'. */
function nodeStates(dir: string): Array<{ containerd: string; runcRoot: string }> {
  const workers = existsSync(join(dir, 'nodes')) ? readdirSync(join(dir, 'nodes')).map((name) => workerLayout(dir, name)) : [];
  return [
    { containerd: join(dir, 'containerd'), runcRoot: runcRootOf(dir) },
    ...workers.map((worker) => ({ containerd: join(worker.shadow, 'containerd'), runcRoot: worker.runcRoot })),
  ];
}

// Stopped in this order: the kubelet before the runtime it would restart containers on, the API
// server's clients before it. The API server and etcd keep nothing worth a graceful shutdown
// (the API server's takes seconds), and whatever else names the directory (the relay) goes with
// them. containerd's shims stay until their containers are deleted (deleteContainers).
const STAGES: Array<{ names: string[]; graceMs: number }> = [
  { names: ['kube-scheduler', 'kube-controller-manager', 'kube-proxy'], graceMs: 5000 },
  { names: ['kubelet'], graceMs: 5000 },
  { names: ['containerd'], graceMs: 5000 },
];
const SHIM = 'containerd-shim-runc-v2';

export async function removeClusterLeftovers(dir: string): Promise<void> {
  await stopProcesses(dir);
  const tasks = tasksOf(dir);
  deleteContainers(dir);
  // Shims whose containers are gone exit by themselves; any left are stopped here.
  await terminate(
    processesNaming(dir).map((process) => process.pid),
    2000,
  );
  for (const { socket } of tasks) if (socket) rmSync(socket, { force: true });
  removeCachedResults(tasks.map((task) => task.id));
  // The other nodes' mounts were in their own mount namespaces, gone with their last process.
  unmountUnder(dir);
  for (const netns of clusterNamespaces(basename(dir))) spawnSync('ip', ['netns', 'del', netns], { stdio: 'ignore' });
  removeHostPaths(dir);
  rmSync(dir, { recursive: true, force: true });
}

async function stopProcesses(dir: string): Promise<void> {
  for (const stage of STAGES) {
    const pids = processesNaming(dir).filter((process) => stage.names.includes(process.name));
    await terminate(
      pids.map((process) => process.pid),
      stage.graceMs,
    );
  }
  const rest = processesNaming(dir).filter((process) => process.name !== SHIM);
  await terminate(
    rest.map((process) => process.pid),
    0,
  );
}

/** Kills and deletes every container runc still knows in this cluster (their cgroups go with them). */
function deleteContainers(dir: string): void {
  for (const { runcRoot: root } of nodeStates(dir)) {
    if (!existsSync(root)) continue;
    for (const namespace of readdirSync(root)) {
      for (const id of readdirSync(join(root, namespace))) {
        spawnSync('runc', ['--root', join(root, namespace), 'delete', '--force', id], { stdio: 'ignore' });
      }
    }
  }
}

/** The cluster's network namespaces: its first node's (named as the directory), and those named <it>-<suffix> (other nodes, the router). */
function clusterNamespaces(name: string): string[] {
  const listed = execFileSync('ip', ['netns', 'list'], { encoding: 'utf8' })
    .split('\n')
    .map((line) => line.split(' ')[0] ?? '');
  return [name, ...listed.filter((netns) => netns.startsWith(`${name}-`))];
}

/**
 * The containers containerd ran, from its task directories, with their shims' sockets: containerd
 * 1.6 puts those in /run/containerd/s whatever its own paths.
 */
function tasksOf(dir: string): Array<{ id: string; socket?: string }> {
  return nodeStates(dir).flatMap(({ containerd }) => tasksUnder(join(containerd, 'state/io.containerd.runtime.v2.task')));
}

function tasksUnder(root: string): Array<{ id: string; socket?: string }> {
  if (!existsSync(root)) return [];
  return readdirSync(root).flatMap((namespace) =>
    readdirSync(join(root, namespace)).map((id) => {
      try {
        const address = readFileSync(join(root, namespace, id, 'address'), 'utf8').trim();
        return address.startsWith('unix:///run/containerd/s/') ? { id, socket: address.slice('unix://'.length) } : { id };
      } catch {
        return { id };
      }
    }),
  );
}

/** libcni's cached results (<network>-<sandbox id>-<interface>) of sandboxes that got no DEL. */
function removeCachedResults(ids: string[]): void {
  const results = '/var/lib/cni/results';
  if (!existsSync(results)) return;
  for (const entry of readdirSync(results)) {
    if (ids.some((id) => entry.includes(`-${id}-`))) rmSync(join(results, entry), { force: true });
  }
}

/** Unmounts every mount at or below `dir`, deepest first. */
function unmountUnder(dir: string): void {
  for (let pass = 0; pass < 5; pass++) {
    const mounts = mountsUnder(dir);
    if (mounts.length === 0) return;
    for (const mount of mounts.sort((a, b) => b.length - a.length)) {
      if (spawnSync('umount', [mount], { stdio: 'ignore' }).status !== 0) spawnSync('umount', ['-l', mount], { stdio: 'ignore' });
    }
  }
}

export function mountsUnder(dir: string): string[] {
  const decode = (path: string) => path.replace(/\\([0-7]{3})/g, (_, octal: string) => String.fromCharCode(Number.parseInt(octal, 8)));
  return readFileSync('/proc/self/mountinfo', 'utf8')
    .split('\n')
    .map((line) => decode(line.split(' ')[4] ?? ''))
    .filter((mount) => mount === dir || mount.startsWith(`${dir}/`));
}

/**
 * Paths outside the directory that no setting moves: the kubelet's device-plugin socket (a
 * constant in k8s.io/kubelet), its /var/log/containers links (another constant), the shim socket
 * directory, runc's k8s.io cgroup parents. Only this cluster's entries are removed, and of the
 * directories only those that did not exist before the cluster started (recordHostPaths), and only
 * when empty, so another cluster (or anything else) using them keeps its own.
 */
const HOST_DIRS = [
  '/var/log/containers',
  '/var/lib/kubelet/device-plugins',
  '/var/lib/kubelet',
  '/run/containerd/s',
  '/run/containerd',
  // libcni's result cache: the DELs remove their entries.
  '/var/lib/cni/results',
  '/var/lib/cni',
];
const cgroupParents = () =>
  existsSync('/sys/fs/cgroup') ? readdirSync('/sys/fs/cgroup').map((controller) => `/sys/fs/cgroup/${controller}/k8s.io`) : [];
const createdRecord = (dir: string) => join(dir, 'host-paths-created.json');

/** Notes which of the host directories the cluster may create do not exist yet. */
export function recordHostPaths(dir: string): void {
  writeFileSync(createdRecord(dir), JSON.stringify([...HOST_DIRS, ...cgroupParents()].filter((path) => !existsSync(path))));
}

function removeHostPaths(dir: string): void {
  const logs = '/var/log/containers';
  if (existsSync(logs)) {
    for (const link of readdirSync(logs)) {
      try {
        if (readlinkSync(join(logs, link)).startsWith(`${dir}/`)) unlinkSync(join(logs, link));
      } catch {
        // Not a link.
      }
    }
  }
  const otherKubelet = readdirSync('/proc').some((entry) => /^\d+$/.test(entry) && alive(Number(entry)) && exeName(entry) === 'kubelet');
  if (!otherKubelet) rmSync('/var/lib/kubelet/device-plugins/kubelet.sock', { force: true });
  let created: string[] = [];
  try {
    created = JSON.parse(readFileSync(createdRecord(dir), 'utf8'));
  } catch {
    return;
  }
  for (const empty of created) {
    try {
      rmdirSync(empty);
    } catch {
      // Absent, or still in use by someone else.
    }
  }
}

function exeName(pid: string): string {
  try {
    return basename(readlinkSync(`/proc/${pid}/exe`));
  } catch {
    return '';
  }
}

/** The clusters (directories and network namespaces) of test processes that are gone. */
async function sweepClusterLeftovers(): Promise<void> {
  const owner = (name: string) => Number(name.slice(CLUSTER_PREFIX.length).split('-')[0]);
  const orphaned = (name: string) => name.startsWith(CLUSTER_PREFIX) && owner(name) > 0 && !existsSync(`/proc/${owner(name)}`);
  for (const name of readdirSync(tmpdir()).filter(orphaned)) await removeClusterLeftovers(join(tmpdir(), name));
  const namespaces = execFileSync('ip', ['netns', 'list'], { encoding: 'utf8' })
    .split('\n')
    .map((line) => line.split(' ')[0] ?? '');
  for (const name of namespaces.filter(orphaned)) spawnSync('ip', ['netns', 'del', name], { stdio: 'ignore' });
}

if (process.argv[1] && import.meta.filename === process.argv[1]) await sweepClusterLeftovers();
