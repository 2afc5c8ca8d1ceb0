// podman 4 with its CNI backend, configured as runtime-testing.md found it works here: runc,
// cgroupfs, explicit ulimits, vfs storage, everything under a scratch directory removed at
// teardown, and a busybox image imported from Debian's busybox-static.
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdirSync, readdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

import type { ExecutionContext } from 'ava';

import { AGENT_ENV, DIST_CNI, ROOT, SYSTEM_CNI, tempDir } from './cni.ts';

export const IMAGE = 'localhost/netplug-busybox:latest';

export interface Podman {
  /** Runs podman; returns stdout, throws with stderr on failure. */
  run(args: string[]): string;
  /** Runs podman and returns the whole outcome. */
  spawn(args: string[]): { status: number | null; stdout: string; stderr: string };
  /** Where network configuration lists go. */
  networkDir: string;
  scratch: string;
}

export function podman(t: ExecutionContext): Podman {
  execFileSync('sh', ['scripts/ensure-packages.sh', 'podman', 'runc', 'conmon', 'catatonit', 'busybox-static'], {
    cwd: ROOT,
    stdio: 'ignore',
  });
  const scratch = tempDir(t, 'podman');
  const networkDir = join(scratch, 'cni');
  for (const dir of ['cni', 'tmp', 'rootfs/bin', 'rootfs/etc', 'rootfs/proc', 'rootfs/sys', 'rootfs/dev', 'rootfs/tmp', 'rootfs/run']) {
    mkdirSync(join(scratch, dir), { recursive: true });
  }
  writeFileSync(
    join(scratch, 'containers.conf'),
    `[containers]
netns = "bridge"
default_ulimits = ["nofile=1024:1024", "nproc=4096:4096"]
[engine]
cgroup_manager = "cgroupfs"
events_logger = "file"
events_logfile_path = "${scratch}/events.log"
runtime = "runc"
tmp_dir = "${scratch}/tmp"
[network]
network_backend = "cni"
cni_plugin_dirs = ["${DIST_CNI}", "${SYSTEM_CNI}"]
network_config_dir = "${networkDir}"
`,
  );
  writeFileSync(
    join(scratch, 'storage.conf'),
    `[storage]\ndriver = "vfs"\nrunroot = "${scratch}/runroot"\ngraphroot = "${scratch}/root"\n`,
  );
  const env = {
    PATH: '/usr/sbin:/usr/bin:/sbin:/bin',
    CONTAINERS_CONF: join(scratch, 'containers.conf'),
    CONTAINERS_STORAGE_CONF: join(scratch, 'storage.conf'),
    TMPDIR: join(scratch, 'tmp'),
    // Agent mode: podman's CNI backend passes its environment on to the plugins.
    ...AGENT_ENV,
  };
  const spawn = (args: string[]) => {
    const out = spawnSync('podman', args, { env, encoding: 'utf8', timeout: 120_000 });
    return { status: out.status, stdout: out.stdout, stderr: out.stderr };
  };
  const run = (args: string[]) => {
    const out = spawn(args);
    if (out.status !== 0) throw new Error(`podman ${args.join(' ')} failed: ${out.stderr}`);
    return out.stdout.trim();
  };
  // Every container is removed before the scratch directory goes.
  t.teardown(() => void spawn(['rm', '--all', '--force']));

  const rootfs = join(scratch, 'rootfs');
  execFileSync('cp', ['/bin/busybox', join(rootfs, 'bin/busybox')]);
  for (const applet of execFileSync('/bin/busybox', ['--list'], { encoding: 'utf8' }).split('\n').filter(Boolean)) {
    if (applet !== 'busybox') symlinkSync('busybox', join(rootfs, 'bin', applet));
  }
  writeFileSync(join(rootfs, 'etc/passwd'), 'root:x:0:0:root:/root:/bin/sh\n');
  writeFileSync(join(rootfs, 'etc/group'), 'root:x:0:\n');
  execFileSync('tar', ['-C', rootfs, '-cf', join(scratch, 'rootfs.tar'), ...readdirSync(rootfs)]);
  run(['import', '--change', 'CMD ["/bin/sh"]', join(scratch, 'rootfs.tar'), IMAGE]);
  return { run, spawn, networkDir, scratch };
}
