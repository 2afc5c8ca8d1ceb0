// The image `npm run build:image` writes, by reference and by archive path; the manifests name the
// same reference (imagePullPolicy IfNotPresent: it is imported, never pulled).
import { arch } from 'node:os';

import { FLANNEL_VERSION } from '../../ts/render/flannel.ts';
import { IMAGE_REPOSITORY } from '../../ts/render/objects.ts';
import { NETPLUG_VERSION } from '../../ts/version.ts';

export const NETPLUG_IMAGE = `${IMAGE_REPOSITORY}:${NETPLUG_VERSION}`;

/** Node's architecture names against the OCI (Go) names an image config and index use. */
const OCI_ARCH: Record<string, string> = { x64: 'amd64', arm64: 'arm64' };

/** This machine's architecture as an image names it (amd64, arm64). */
export function imageArch(): string {
  const name = OCI_ARCH[arch()];
  if (!name) throw new Error(`images are built on x64 or arm64, not ${arch()}`);
  return name;
}

/** The archive's file name under dist/images (or the directory given to build-image.ts). */
export function imageArchiveName(): string {
  return `netplug-${NETPLUG_VERSION}-${imageArch()}.oci.tar`;
}

/** The flannel variant's image archive (scripts/build-flannel-image.ts), beside netplug's. */
export function flannelImageArchiveName(): string {
  return `netplug-flannel-${FLANNEL_VERSION}-${imageArch()}.oci.tar`;
}
