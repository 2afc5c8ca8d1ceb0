// The test cluster's images, written by hand as OCI image layouts and archived for
// `ctr images import`: no registry, no base image download. busybox is Debian's busybox-static with
// a link per applet; the sandbox ("pause") image is the static Go program scripts/kube-binaries.sh
// builds. containerd 1.6 names an imported image only from the index annotation
// io.containerd.image.name, so each layout carries its full reference there.
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { copyFileSync, mkdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

export const BUSYBOX_IMAGE = 'localhost/netplug-test/busybox:latest';
export const PAUSE_IMAGE = 'localhost/netplug-test/pause:latest';

const ARCH: Record<string, string> = { x64: 'amd64', arm64: 'arm64' };

/** Writes both images' archives under `dir`; returns their paths. */
export function buildClusterImages(dir: string, pauseBinary: string): { busybox: string; pause: string } {
  const busyboxRoot = join(dir, 'busybox-rootfs');
  mkdirSync(join(busyboxRoot, 'bin'), { recursive: true });
  for (const name of ['etc', 'tmp', 'proc', 'sys', 'dev', 'root']) mkdirSync(join(busyboxRoot, name), { recursive: true });
  copyFileSync('/bin/busybox', join(busyboxRoot, 'bin/busybox'));
  const applets = execFileSync('/bin/busybox', ['--list'], { encoding: 'utf8' }).split('\n').filter(Boolean);
  for (const applet of applets) if (applet !== 'busybox') symlinkSync('busybox', join(busyboxRoot, 'bin', applet));
  const pauseRoot = join(dir, 'pause-rootfs');
  mkdirSync(pauseRoot, { recursive: true });
  copyFileSync(pauseBinary, join(pauseRoot, 'pause'));
  return {
    busybox: writeImage(join(dir, 'busybox'), busyboxRoot, BUSYBOX_IMAGE, { Cmd: ['sh'] }),
    pause: writeImage(join(dir, 'pause'), pauseRoot, PAUSE_IMAGE, { Entrypoint: ['/pause'] }),
  };
}

/** One layer from `rootfs`, a config, a manifest, an index: the layout, then its archive (returned). */
function writeImage(layout: string, rootfs: string, reference: string, config: Record<string, unknown>): string {
  const blobs = join(layout, 'blobs/sha256');
  mkdirSync(blobs, { recursive: true });
  const blob = (data: Buffer, mediaType: string) => {
    const hex = createHash('sha256').update(data).digest('hex');
    writeFileSync(join(blobs, hex), data);
    return { mediaType, digest: `sha256:${hex}`, size: data.length };
  };
  const layerTar = join(layout, 'layer.tar');
  // Fixed owner and times: the same files make the same layer digest.
  execFileSync('tar', ['--numeric-owner', '--owner=0', '--group=0', '--mtime=@0', '--sort=name', '-cf', layerTar, '-C', rootfs, '.']);
  const layer = blob(readFileSync(layerTar), 'application/vnd.oci.image.layer.v1.tar');
  const imageConfig = {
    architecture: ARCH[process.arch] ?? process.arch,
    os: 'linux',
    config: { Env: ['PATH=/bin'], ...config },
    rootfs: { type: 'layers', diff_ids: [layer.digest] },
  };
  const configBlob = blob(Buffer.from(JSON.stringify(imageConfig)), 'application/vnd.oci.image.config.v1+json');
  const manifest = blob(
    Buffer.from(
      JSON.stringify({ schemaVersion: 2, mediaType: 'application/vnd.oci.image.manifest.v1+json', config: configBlob, layers: [layer] }),
    ),
    'application/vnd.oci.image.manifest.v1+json',
  );
  const tag = reference.slice(reference.lastIndexOf(':') + 1);
  const annotations = { 'io.containerd.image.name': reference, 'org.opencontainers.image.ref.name': tag };
  writeFileSync(join(layout, 'index.json'), JSON.stringify({ schemaVersion: 2, manifests: [{ ...manifest, annotations }] }));
  writeFileSync(join(layout, 'oci-layout'), JSON.stringify({ imageLayoutVersion: '1.0.0' }));
  const archive = `${layout}.tar`;
  execFileSync('tar', ['-cf', archive, '-C', layout, 'oci-layout', 'index.json', 'blobs']);
  return archive;
}
