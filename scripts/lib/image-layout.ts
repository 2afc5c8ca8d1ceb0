// A one-layer OCI image archive from a root file system directory, reproducibly: the same files
// give the same bytes, so the same digests. The layer and the archive are written by GNU tar
// (installed everywhere the build runs) with every varying field fixed: names sorted, mtime 0,
// owner 0:0 by number, ustar format (no access or change times); modes come from the tree, which
// the caller sets explicitly. Node computes the digests (sha256 of the layer as tar: the config's
// diff_id; of the gzip stream: the blob) and gzips the layer (zlib writes no name and mtime 0).
import { spawn } from 'node:child_process';
import { createHash, type Hash } from 'node:crypto';
import { createWriteStream, mkdirSync, readdirSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { createGzip } from 'node:zlib';

interface Descriptor {
  mediaType: string;
  digest: string;
  size: number;
}

export interface ImageSpec {
  reference: string;
  /** OCI architecture name (amd64, arm64). */
  architecture: string;
  /** The image config's `config` member (Env, Entrypoint, Cmd, Labels ...). */
  config: Record<string, unknown>;
}

export interface WrittenImage {
  archive: string;
  manifest: Descriptor;
  config: Descriptor;
  layer: Descriptor;
  diffId: string;
}

export const MEDIA = {
  index: 'application/vnd.oci.image.index.v1+json',
  manifest: 'application/vnd.oci.image.manifest.v1+json',
  config: 'application/vnd.oci.image.config.v1+json',
  layer: 'application/vnd.oci.image.layer.v1.tar+gzip',
} as const;

/** tar's options that make its output a function of the files' names, contents, modes and links. */
const FIXED = ['--format=ustar', '--sort=name', '--mtime=@0', '--owner=0', '--group=0', '--numeric-owner'];

/**
 * Writes `archive` (the OCI image layout of `rootfs` as one layer, tarred), using `work` as scratch
 * space (removed after). containerd 1.6's `ctr images import` names the image from the index
 * annotation io.containerd.image.name; org.opencontainers.image.ref.name carries the tag, as the
 * OCI layout specification has it (ctr uses it only when the other is missing, prefixed
 * `import-<date>`).
 */
export async function writeImageArchive(rootfs: string, archive: string, work: string, image: ImageSpec): Promise<WrittenImage> {
  const blobs = join(work, 'blobs/sha256');
  rmSync(work, { recursive: true, force: true });
  mkdirSync(blobs, { recursive: true });
  const writeBlob = (data: Buffer, mediaType: string): Descriptor => {
    const hex = sha256(data);
    writeFileSync(join(blobs, hex), data);
    return { mediaType, digest: `sha256:${hex}`, size: data.length };
  };
  try {
    const { layer, diffId } = await writeLayer(rootfs, blobs);
    const config = writeBlob(
      json({
        architecture: image.architecture,
        os: 'linux',
        config: image.config,
        rootfs: { type: 'layers', diff_ids: [diffId] },
      }),
      MEDIA.config,
    );
    const manifest = writeBlob(json({ schemaVersion: 2, mediaType: MEDIA.manifest, config, layers: [layer] }), MEDIA.manifest);
    const tag = image.reference.slice(image.reference.lastIndexOf(':') + 1);
    const index = {
      schemaVersion: 2,
      mediaType: MEDIA.index,
      manifests: [
        {
          ...manifest,
          platform: { architecture: image.architecture, os: 'linux' },
          annotations: { 'io.containerd.image.name': image.reference, 'org.opencontainers.image.ref.name': tag },
        },
      ],
    };
    writeFileSync(join(work, 'index.json'), json(index));
    writeFileSync(join(work, 'oci-layout'), json({ imageLayoutVersion: '1.0.0' }));
    // Written beside the target and renamed: a reader never sees half an archive.
    mkdirSync(dirname(archive), { recursive: true });
    const partial = `${archive}.partial`;
    // The layout's own files are plain data: one mode for all, whatever the umask made.
    await runTar([
      '--create',
      `--file=${partial}`,
      ...FIXED,
      '--mode=u=rwX,go=rX',
      `--directory=${work}`,
      'oci-layout',
      'index.json',
      'blobs',
    ]);
    renameSync(partial, archive);
    return { archive, manifest, config, layer, diffId };
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

/** The layer: tar of `rootfs` → sha256 (diff_id) → gzip → sha256 (blob digest) → a file in `blobs`. */
async function writeLayer(rootfs: string, blobs: string): Promise<{ layer: Descriptor; diffId: string }> {
  const partial = join(blobs, 'layer.partial');
  // Top-level names listed, not `.`: entries read `usr/bin/...`, as registries' layers do.
  const tar = spawn('tar', ['--create', '--file=-', ...FIXED, `--directory=${rootfs}`, ...readdirSync(rootfs).sort()], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  tar.stderr.on('data', (chunk) => (stderr += chunk));
  const exited = new Promise<number | null>((resolve) => tar.on('close', resolve));
  const tarHash = createHash('sha256');
  const gzipHash = createHash('sha256');
  let size = 0;
  await pipeline(
    tar.stdout,
    tap(tarHash),
    // zlib's default level: the netplug layer took 16.7 s of CPU at level 9 and 6.5 s here, for
    // 0.5 % more bytes (44.4 MB against 44.1).
    createGzip({ level: 6 }),
    tap(gzipHash, (n) => (size += n)),
    createWriteStream(partial),
  );
  const code = await exited;
  if (code !== 0) throw new Error(`tar of ${rootfs} exited with ${code}: ${stderr.trim()}`);
  const hex = gzipHash.digest('hex');
  renameSync(partial, join(blobs, hex));
  return { layer: { mediaType: MEDIA.layer, digest: `sha256:${hex}`, size }, diffId: `sha256:${tarHash.digest('hex')}` };
}

/** A pass-through stream that hashes (and counts) what flows through it. */
function tap(hash: Hash, count?: (bytes: number) => void): Transform {
  return new Transform({
    transform(chunk: Buffer, _encoding, done) {
      hash.update(chunk);
      count?.(chunk.length);
      done(null, chunk);
    },
  });
}

function runTar(args: string[]): Promise<void> {
  return new Promise((resolve, reject) => {
    const tar = spawn('tar', args, { stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    tar.stderr.on('data', (chunk) => (stderr += chunk));
    tar.on('error', reject);
    tar.on('close', (code) => (code === 0 ? resolve() : reject(new Error(`tar ${args.join(' ')} exited with ${code}: ${stderr.trim()}`))));
  });
}

function sha256(data: Buffer): string {
  return createHash('sha256').update(data).digest('hex');
}

/** Compact JSON in insertion order: the same object gives the same bytes, hence the same digest. */
function json(value: unknown): Buffer {
  return Buffer.from(JSON.stringify(value));
}
