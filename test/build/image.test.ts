// `npm run build:image` (scripts/build-image.ts): an OCI archive whose digests verify, whose one
// layer holds the executables under their image names and exactly the shared libraries they load,
// built the same twice; containerd 1.6 imports it under the manifests' reference, and a pod of a
// real kubelet runs the executables from it.
import { execFile, execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { arch, tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { promisify } from 'node:util';
import { gunzipSync } from 'node:zlib';

import test from 'ava';

import { readElfDynamic } from '../../scripts/lib/image-elf.ts';
import { MEDIA } from '../../scripts/lib/image-layout.ts';
import { imageArch, imageArchiveName, NETPLUG_IMAGE } from '../../scripts/lib/image-ref.ts';
import { NETPLUG_VERSION } from '../../ts/version.ts';
import { apply, getJson, startCluster, type Cluster } from '../helpers/cluster.ts';

const ROOT = new URL('../../', import.meta.url).pathname;
const run = promisify(execFile);
const ADDON = `netplug-dataplane.linux-${arch()}-gnu.node`;
const TRIPLET = { x64: 'x86_64-linux-gnu', arm64: 'aarch64-linux-gnu' }[arch() as 'x64' | 'arm64'];

const scratch = mkdtempSync(join(tmpdir(), 'netplug-image-test-'));
let cluster: Cluster | undefined;
let built: { stdout: string; archive: string } | undefined;

/** Runs the build as `npm run build:image` does (its prebuild, `npm run build`, is npm test's pretest). */
async function buildImage(outDir: string): Promise<{ stdout: string; archive: string }> {
  const { stdout } = await run(process.execPath, [join(ROOT, 'scripts/build-image.ts'), '--out', outDir], { cwd: ROOT });
  return { stdout, archive: join(outDir, imageArchiveName()) };
}

test.before(async (t) => {
  // A cold build of the Kubernetes binaries (npm test's pretest does it first) takes minutes.
  t.timeout(30 * 60_000);
  // The cluster starts while the image builds: both are slow.
  const [started, image] = await Promise.allSettled([startCluster(), buildImage(join(scratch, 'first'))]);
  if (started.status === 'fulfilled') cluster = started.value;
  if (image.status === 'fulfilled') built = image.value;
  if (started.status === 'rejected') throw started.reason;
  if (image.status === 'rejected') throw image.reason;
  t.log(`cluster ${cluster?.netns} up: ${JSON.stringify(cluster?.timings)}`);
});

test.after.always(async () => {
  await cluster?.stop();
  rmSync(scratch, { recursive: true, force: true });
});

const image = () => {
  if (!built) throw new Error('the image was not built (see the before hook)');
  return built;
};

const sha256 = (data: Buffer) => `sha256:${createHash('sha256').update(data).digest('hex')}`;

/** The archive unpacked: index.json, the blobs by digest. */
function unpackArchive(archive: string): { index: any; blob: (digest: string) => Buffer } {
  const dir = join(scratch, `layout-${basename(archive)}`);
  mkdirSync(dir, { recursive: true });
  execFileSync('tar', ['-xf', archive, '-C', dir]);
  return {
    index: JSON.parse(readFileSync(join(dir, 'index.json'), 'utf8')),
    blob: (digest) => readFileSync(join(dir, 'blobs', ...digest.split(':'))),
  };
}

test.serial('the build prints the reference last and writes the archive under its name', (t) => {
  const lines = image().stdout.trim().split('\n');
  t.is(lines.at(-1), NETPLUG_IMAGE);
  t.is(NETPLUG_IMAGE, `localhost/netplug:${NETPLUG_VERSION}`);
  t.is(basename(image().archive), `netplug-${NETPLUG_VERSION}-${imageArch()}.oci.tar`);
  t.true(statSync(image().archive).isFile());
});

test.serial('index.json → manifest → config and layer: digests and sizes verify, the config says how to run', (t) => {
  const { index, blob } = unpackArchive(image().archive);
  t.is(index.schemaVersion, 2);
  t.is(index.manifests.length, 1);
  const [entry] = index.manifests;
  // containerd 1.6 names the image from io.containerd.image.name; the OCI tag annotation agrees.
  t.deepEqual(entry.annotations, { 'io.containerd.image.name': NETPLUG_IMAGE, 'org.opencontainers.image.ref.name': NETPLUG_VERSION });
  t.deepEqual(entry.platform, { architecture: imageArch(), os: 'linux' });
  const verified = (descriptor: { digest: string; size: number }) => {
    const data = blob(descriptor.digest);
    t.is(sha256(data), descriptor.digest);
    t.is(data.length, descriptor.size);
    return data;
  };
  t.is(entry.mediaType, MEDIA.manifest);
  const manifest = JSON.parse(verified(entry).toString());
  t.is(manifest.config.mediaType, MEDIA.config);
  t.is(manifest.layers.length, 1);
  t.is(manifest.layers[0].mediaType, MEDIA.layer);
  const config = JSON.parse(verified(manifest.config).toString());
  const layer = verified(manifest.layers[0]);
  t.deepEqual(config.rootfs, { type: 'layers', diff_ids: [sha256(gunzipSync(layer))] });
  t.is(config.architecture, imageArch());
  t.is(config.os, 'linux');
  t.deepEqual(config.config.Env, ['PATH=/usr/bin:/opt/cni/bin']);
  t.is(config.config.Entrypoint, undefined);
  t.is(config.config.Labels['org.opencontainers.image.version'], NETPLUG_VERSION);
});

/** The layer's entries as `tar -tv` shows them: path → mode (and link target); and their owners. */
function layerListing(layerFile: string): { entries: Map<string, string>; owners: Set<string> } {
  const listing = execFileSync('tar', ['-tvzf', layerFile], { encoding: 'utf8', maxBuffer: 16 << 20 });
  const entries = new Map<string, string>();
  const owners = new Set<string>();
  for (const line of listing.trim().split('\n')) {
    // mode owner size date time path [link to target]
    const [mode, owner, , , , path, ...link] = line.split(/\s+/);
    entries.set((path as string).replace(/\/$/, ''), [mode, ...link].join(' '));
    owners.add(owner as string);
  }
  return { entries, owners };
}

test.serial('the layer holds the executables under their image names and exactly the libraries they load', (t) => {
  const { index, blob } = unpackArchive(image().archive);
  const manifest = JSON.parse(blob(index.manifests[0].digest).toString());
  const layerFile = join(scratch, 'layer.tar.gz');
  writeFileSync(layerFile, blob(manifest.layers[0].digest));
  const { entries, owners } = layerListing(layerFile);
  t.deepEqual([...owners], ['0/0']);
  const rootfs = join(scratch, 'rootfs');
  mkdirSync(rootfs);
  execFileSync('tar', ['-xzf', layerFile, '-C', rootfs]);

  // The SEA once (under its first name in tar's order), its other names hard links to it; the addon
  // beside each directory of them; the shim, netplug, a file of its own.
  const sea = 'opt/cni/bin/netplug-ipam';
  t.is(entries.get(sea), '-rwxr-xr-x');
  const seaNames = [
    'opt/cni/bin/netplug-oneshot',
    ...[
      'netplug-node',
      'netplug-install',
      'netplug-kube-controllers',
      'netplug-operator',
      'netplug-flows',
      'netplug-flow-viewer',
      'netplugctl',
    ].map((n) => `usr/bin/${n}`),
  ];
  for (const name of seaNames) t.is(entries.get(name), `hrwxr-xr-x link to ${sea}`, name);
  t.is(entries.get(`opt/cni/bin/${ADDON}`), '-rwxr-xr-x');
  t.is(entries.get(`usr/bin/${ADDON}`), `hrwxr-xr-x link to opt/cni/bin/${ADDON}`);
  t.true(readFileSync(join(rootfs, sea)).equals(readFileSync(join(ROOT, 'dist/cni/netplug-oneshot'))), 'the SEA npm run build wrote');
  t.is(entries.get('opt/cni/bin/netplug'), '-rwxr-xr-x');
  t.true(
    readFileSync(join(rootfs, 'opt/cni/bin/netplug')).equals(readFileSync(join(ROOT, 'dist/cni/netplug'))),
    'the shim npm run build wrote',
  );
  for (const plugin of ['portmap', 'host-local', 'loopback', 'tuning']) {
    t.is(entries.get(`opt/cni/bin/${plugin}`), '-rwxr-xr-x', plugin);
    t.true(readFileSync(join(rootfs, 'opt/cni/bin', plugin)).equals(readFileSync(join('/usr/lib/cni', plugin))), `Debian's ${plugin}`);
  }
  t.is(entries.get('tmp'), 'drwxrwxrwt');

  // The loader's view: every ELF's interpreter at its path, every DT_NEEDED name found in the
  // image's default search directories (no ld.so.cache in the image), transitively.
  const searchDirs = [`lib/${TRIPLET}`, `usr/lib/${TRIPLET}`, 'lib', 'usr/lib'];
  const needed = new Set<string>();
  const missing: string[] = [];
  const elfFiles = [...entries.keys()].filter((path) => entries.get(path)?.startsWith('-') && readElfDynamic(join(rootfs, path)));
  const dynamics = new Map(elfFiles.map((path) => [path, readElfDynamic(join(rootfs, path))]));
  // The loader answers for its own soname itself (libc and the addon name it).
  const loaders = new Set([...dynamics.values()].map((dynamic) => basename(dynamic?.interpreter ?? '/')));
  for (const [path, dynamic] of dynamics) {
    const interpreter = dynamic?.interpreter?.slice(1);
    if (interpreter) {
      if (entries.has(interpreter)) needed.add(interpreter);
      else missing.push(`${path}: interpreter /${interpreter}`);
    }
    for (const name of dynamic?.needed ?? []) {
      if (loaders.has(name)) continue;
      const found = searchDirs.map((dir) => `${dir}/${name}`).find((candidate) => entries.has(candidate));
      if (found) needed.add(found);
      else missing.push(`${path}: ${name}`);
    }
  }
  t.deepEqual(missing, []);
  t.true(elfFiles.includes(`lib/${TRIPLET}/libc.so.6`), 'the libraries were themselves read');
  // iptables' extensions are loaded at run time (dlopen), all of Debian's: no executable names them.
  const xtables = `usr/lib/${TRIPLET}/xtables/`;
  const extensions = [...entries.keys()].filter((path) => path.startsWith(xtables) && entries.get(path)?.startsWith('-'));
  t.deepEqual(
    extensions.map((path) => basename(path)).sort(),
    readdirSync(`/${xtables}`)
      .filter((name) => name.endsWith('.so'))
      .sort(),
  );
  const libraries = [...entries.keys()].filter(
    (path) => /^(lib|lib64|usr\/lib)\//.test(path) && !path.startsWith(xtables) && entries.get(path)?.startsWith('-'),
  );
  t.deepEqual(libraries.sort(), [...needed].sort(), 'nothing in /lib but what is loaded');

  const others = [...entries.keys()].filter((path) => !/^(lib|lib64|usr\/lib)(\/|$)/.test(path)).sort();
  t.deepEqual(others, [
    'opt',
    'opt/cni',
    'opt/cni/bin',
    'opt/cni/bin/host-local',
    'opt/cni/bin/loopback',
    'opt/cni/bin/netplug',
    `opt/cni/bin/${ADDON}`,
    'opt/cni/bin/netplug-ipam',
    'opt/cni/bin/netplug-oneshot',
    'opt/cni/bin/portmap',
    'opt/cni/bin/tuning',
    'tmp',
    'usr',
    'usr/bin',
    'usr/bin/iptables',
    'usr/bin/iptables-restore',
    'usr/bin/iptables-save',
    `usr/bin/${ADDON}`,
    'usr/bin/netplug-flow-viewer',
    'usr/bin/netplug-flows',
    'usr/bin/netplug-install',
    'usr/bin/netplug-kube-controllers',
    'usr/bin/netplug-node',
    'usr/bin/netplug-operator',
    'usr/bin/netplugctl',
  ]);
  t.false(existsSync(join(rootfs, 'bin/sh')) || existsSync(join(rootfs, 'usr/bin/sh')), 'no shell');
  // netplug-node's natOutgoing runs iptables and iptables-restore: they start in the image alone.
  for (const name of ['iptables', 'iptables-restore'])
    t.regex(execFileSync('chroot', [rootfs, `/usr/bin/${name}`, '--version'], { encoding: 'utf8' }), /nf_tables/, name);
});

test.serial('a second build of the same files gives the same archive, byte for byte', async (t) => {
  const again = await buildImage(join(scratch, 'second'));
  t.is(sha256(readFileSync(again.archive)), sha256(readFileSync(image().archive)));
  t.deepEqual(
    readdirSync(join(ROOT, 'dist/images')).filter((name) => name.startsWith('.work-')),
    [],
    'the build removed its scratch space',
  );
});

test.serial('containerd 1.6 imports it under the reference and a pod runs the executables from it', async (t) => {
  if (!cluster) throw new Error('the cluster did not start (see the before hook)');
  const node = cluster;
  await node.importImage(image().archive);
  const container = (name: string, command: string[], env: { name: string; value: string }[] = []) => ({
    name,
    image: NETPLUG_IMAGE,
    // As the manifests have it: the kubelet finds the imported image and pulls nothing.
    imagePullPolicy: 'IfNotPresent',
    command,
    env,
  });
  await apply(node, {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: 'netplug-versions', namespace: 'default' },
    spec: {
      // Bound to the node and on its network: no scheduler, no CNI needed (none is installed).
      nodeName: node.nodeName,
      hostNetwork: true,
      tolerations: [{ operator: 'Exists' }],
      restartPolicy: 'Never',
      terminationGracePeriodSeconds: 1,
      containers: [
        container('node', ['/usr/bin/netplug-node', '--version']),
        container('cni', ['/opt/cni/bin/netplug', '--version']),
        // Found through the image's PATH.
        container('ctl', ['netplugctl', '--version']),
        container('portmap', ['portmap'], [{ name: 'CNI_COMMAND', value: 'VERSION' }]),
      ],
    },
  });
  // Until it ends, or a container waits on a pull (the import named the image otherwise).
  const deadline = Date.now() + 180_000;
  const pulling = (pod: any) =>
    (pod.status.containerStatuses ?? []).some((status: any) => /ImagePull|ErrImage/.test(status.state?.waiting?.reason ?? ''));
  let pod = await getJson(node, 'pod', 'netplug-versions');
  while (!['Succeeded', 'Failed'].includes(pod.status.phase) && !pulling(pod) && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 1000));
    pod = await getJson(node, 'pod', 'netplug-versions');
  }
  t.is(pod.status.phase, 'Succeeded', JSON.stringify(pod.status, null, 1));
  const logs = async (name: string) => (await node.kubectl('logs', 'netplug-versions', '-c', name)).trim();
  t.is(await logs('node'), `netplug-node ${NETPLUG_VERSION}`);
  t.is(await logs('cni'), `netplug ${NETPLUG_VERSION}`);
  t.is(await logs('ctl'), `netplugctl ${NETPLUG_VERSION}`);
  t.like(JSON.parse(await logs('portmap')), { cniVersion: '1.0.0' });
});
