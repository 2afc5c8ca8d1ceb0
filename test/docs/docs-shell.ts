// A shell for the commands of docs/install.md and docs/upgrade.md on a test cluster: each command
// runs as written with `sh -ec`, in the node's network namespace (where the API server and etcd
// listen, as on a real node), in a working directory laid out as the repository's root. What a
// reader's machine has, the test cluster's stand-ins give:
//
// - PATH: the cluster's kubectl, helm (scripts/helm.sh), and `ctr` as a wrapper that talks to the
//   cluster's containerd socket;
// - HOME with ~/.kube/config, KUBECONFIG: the cluster's administrator (as seen from the node);
// - ETCD_ENDPOINTS: the etcd the cluster's node reaches, when the test uses one;
// - deploy/manifests/: the repository's files, except those a test substitutes (netplug.yaml,
//   netplug-etcd.yaml, netplug-operator.yaml, custom-resources.yaml ...). A substituted copy
//   differs only where the test node differs from a real one: its CNI directories, netplug's
//   state, log and agent socket, and containerd's pod network namespaces live in the cluster's
//   directory (test/e2e/install.ts manifestFor, test/upgrade/install-previous.ts);
// - dist/: the built executables and image (or a test's copy of them), and the chart package the
//   test builds (dist/charts is not built by npm test's pretest).
//
// The page's build commands (`npm run build:image`, `npm run build:chart`) are fenced ```text:
// npm test's pretest builds dist/ and the image, and a test that rebuilt them would pull them
// from under the tests running beside it.
import { execFile, execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { copyFileSync, mkdirSync, readdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';

import type { Cluster } from '../helpers/cluster.ts';
import { helmBinary } from '../chart/helm.ts';

const run = promisify(execFile);
const ROOT = new URL('../../', import.meta.url).pathname;

export interface DocsShellOptions {
  /** deploy/manifests/<name> → the substituted file to put there instead of the repository's. */
  manifests?: Record<string, string>;
  /** The directory to give as dist/bin (a test's copy of this release); the repository's by default. */
  distBin?: string;
  /** The directory to give as dist/charts, if the commands use it. */
  distCharts?: string;
  /** ETCD_ENDPOINTS, for commands on an etcd install. */
  etcdEndpoints?: string;
}

export interface DocsShell {
  /** The working directory (the stand-in for the repository's root). */
  dir: string;
  env: NodeJS.ProcessEnv;
  /** Runs one command as written; resolves to its standard output, rejects naming the command, its exit and stderr. */
  run(command: string): Promise<string>;
  /** Starts one command as written in its own process group (so a test can kill it whole). */
  spawn(command: string): ChildProcess;
}

let shells = 0;

/** The cluster's Kubernetes binaries (kubectl): cached by scripts/kube-binaries.sh, so this only prints the directory. */
function kubeBinaries(): string {
  return execFileSync('sh', [join(ROOT, 'scripts/kube-binaries.sh')], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] }).trim();
}

export function docsShell(cluster: Cluster, options: DocsShellOptions = {}): DocsShell {
  const dir = join(cluster.dir, `docs-shell-${shells++}`);
  const bin = join(dir, '.bin');
  const home = join(dir, '.home');
  for (const path of [bin, join(home, '.kube'), join(dir, 'deploy/manifests'), join(dir, 'dist')]) mkdirSync(path, { recursive: true });

  symlinkSync(join(kubeBinaries(), 'kubectl'), join(bin, 'kubectl'));
  symlinkSync(helmBinary(), join(bin, 'helm'));
  // containerd of the test node listens on a socket of its own, not /run/containerd/containerd.sock.
  const containerdSocket = join(cluster.dir, 'containerd/containerd.sock');
  writeFileSync(join(bin, 'ctr'), `#!/bin/sh\nexec /usr/bin/ctr --address '${containerdSocket}' "$@"\n`, { mode: 0o755 });
  copyFileSync(cluster.nodeKubeconfig, join(home, '.kube/config'));

  const manifests = join(ROOT, 'deploy/manifests');
  for (const name of readdirSync(manifests)) {
    const substituted = options.manifests?.[name];
    if (substituted) copyFileSync(substituted, join(dir, 'deploy/manifests', name));
    else symlinkSync(join(manifests, name), join(dir, 'deploy/manifests', name));
  }
  for (const name of Object.keys(options.manifests ?? {}))
    if (!readdirSync(manifests).includes(name)) throw new Error(`deploy/manifests/${name} does not exist: nothing to substitute`);
  symlinkSync(options.distBin ?? join(ROOT, 'dist/bin'), join(dir, 'dist/bin'));
  symlinkSync(join(ROOT, 'dist/images'), join(dir, 'dist/images'));
  if (options.distCharts) symlinkSync(options.distCharts, join(dir, 'dist/charts'));

  const env: NodeJS.ProcessEnv = {
    PATH: `${bin}:${process.env['PATH'] ?? '/usr/sbin:/usr/bin:/sbin:/bin'}`,
    HOME: home,
    KUBECONFIG: join(home, '.kube/config'),
    ...(options.etcdEndpoints ? { ETCD_ENDPOINTS: options.etcdEndpoints } : {}),
  };
  const argv = (command: string) => [`--net=${cluster.netnsPath}`, '--', 'sh', '-ec', command];
  return {
    dir,
    env,
    run: async (command) => {
      try {
        return (await run('nsenter', argv(command), { cwd: dir, env, encoding: 'utf8', maxBuffer: 64 << 20 })).stdout;
      } catch (err) {
        const failed = err as { code?: number; stdout?: string; stderr?: string };
        throw new Error(`$ ${command}\nexit ${failed.code}\n${failed.stdout ?? ''}${failed.stderr ?? ''}`.trim());
      }
    },
    spawn: (command) => spawn('nsenter', argv(command), { cwd: dir, env, stdio: ['ignore', 'pipe', 'pipe'], detached: true }),
  };
}

/** Runs `commands` in order, each logged with its output, as a reader types them. */
export async function runCommands(t: { log: (message: string) => void }, shell: DocsShell, commands: string[]): Promise<string[]> {
  const outputs: string[] = [];
  for (const command of commands) {
    const started = Date.now();
    const output = await shell.run(command);
    t.log(`$ ${command}   (${((Date.now() - started) / 1000).toFixed(1)} s)\n${output.trimEnd()}`);
    outputs.push(output);
  }
  return outputs;
}
