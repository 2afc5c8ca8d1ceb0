// The release the upgrade tests start from: an earlier commit of this repository,
// tagged, built by scripts/previous-release.sh with its own dependencies, addon, executables, image
// and chart into a cache directory outside the repository, as the cluster binaries are.
//
// Run as a program, it prints the build's settings for the shell script (`commit=... dir=...`).
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';

import { imageArch } from './image-ref.ts';

/** The tag names the commit; the sha is used when the tag is absent (a clone without tags). */
export const PREVIOUS_RELEASE = { version: '3.30.0', tag: 'v3.30.0', commit: 'ed547829c4030945da84237685bdeec5aad04132' } as const;

const ROOT = new URL('../../', import.meta.url).pathname;

export interface PreviousRelease {
  version: `v${typeof PREVIOUS_RELEASE.version}`;
  /** The built tree: its own deploy/, dist/, README. */
  root: string;
  /** Its image's reference, localhost/netplug:v3.30.0. */
  image: string;
  /** The OCI archive of that image, for `ctr images import`. */
  imageArchive: string;
  /** Its deploy/manifests directory. */
  manifests: string;
  /** Its helm chart package (.tgz). */
  chart: string;
  /** A chart repository directory: the package and its index.yaml. */
  chartIndexDir: string;
  /** Its netplugctl (reports 3.30.0). */
  netplugctl: string;
}

/** The commit to build: the tag's when this clone has it, else the recorded sha; an error saying what is missing otherwise. */
export function previousReleaseCommit(repo = ROOT): string {
  const resolve = (name: string) => {
    try {
      return execFileSync('git', ['-C', repo, 'rev-parse', '--verify', '--quiet', `${name}^{commit}`], {
        encoding: 'utf8',
        stdio: ['ignore', 'pipe', 'ignore'],
      }).trim();
    } catch {
      return undefined;
    }
  };
  const commit = resolve(`refs/tags/${PREVIOUS_RELEASE.tag}`) ?? resolve(PREVIOUS_RELEASE.commit);
  if (!commit)
    throw new Error(
      `the previous release ${PREVIOUS_RELEASE.tag} (commit ${PREVIOUS_RELEASE.commit}) is not in ${repo}'s git history: ` +
        `the upgrade tests build it from there; in a shallow clone run \`git fetch --unshallow --tags\``,
    );
  return commit;
}

/** Where scripts/previous-release.sh builds it: ${XDG_CACHE_HOME:-~/.cache}/netplug/release-v3.30.0-<sha>. */
function previousReleaseDir(commit = previousReleaseCommit()): string {
  const cache = process.env.XDG_CACHE_HOME || join(homedir(), '.cache');
  return join(cache, 'netplug', `release-${PREVIOUS_RELEASE.tag}-${commit}`);
}

/** The built previous release; throws, saying how to build it, when it is not built. */
export function previousRelease(): PreviousRelease {
  const root = previousReleaseDir();
  if (!existsSync(join(root, 'complete')))
    throw new Error(
      `the previous release ${PREVIOUS_RELEASE.tag} is not built in ${root}: run sh scripts/previous-release.sh (npm test's pretest does)`,
    );
  const version = `v${PREVIOUS_RELEASE.version}` as const;
  return {
    version,
    root,
    image: `localhost/netplug:${version}`,
    imageArchive: join(root, 'dist/images', `netplug-${version}-${imageArch()}.oci.tar`),
    manifests: join(root, 'deploy/manifests'),
    chart: join(root, 'dist/charts', `netplug-operator-${PREVIOUS_RELEASE.version}.tgz`),
    chartIndexDir: join(root, 'dist/charts'),
    netplugctl: join(root, 'dist/bin/netplugctl'),
  };
}

if (import.meta.main) {
  try {
    const commit = previousReleaseCommit();
    console.log(`tag=${PREVIOUS_RELEASE.tag}\ncommit=${commit}\ndir=${previousReleaseDir(commit)}`);
  } catch (err) {
    console.error(`netplug: ${(err as Error).message}`);
    process.exit(1);
  }
}
