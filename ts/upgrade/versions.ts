// The spec's version rules for an upgrade to this release: supported from 3.15 up to the target;
// a cluster already at or beyond the target has nothing to do. The cluster's version is the lowest
// of what it says (ClusterInformation: the lowest release its nodes record, or, written by an agent
// from before nodes recorded theirs, that agent's own) and what runs (image tags), so a half-done
// rollout is never taken for a finished one.
import { compareVersions } from '../model/release-versions.ts';
import { NETPLUG_VERSION } from '../version.ts';

const OLDEST_SUPPORTED = 'v3.15.0';
export const TARGET = NETPLUG_VERSION;

export type Window = { state: 'upgrade'; from: string } | { state: 'current'; from: string } | { state: 'refused'; reason: string };

/** `localhost/netplug:v3.30.0` → v3.30.0; undefined without a version tag (a digest, `latest`). */
export function versionOfImage(image: string | undefined): string | undefined {
  const tag = /:([^:/@]+)(@.*)?$/.exec(image ?? '')?.[1];
  return tag !== undefined && compareVersions(tag, '0.0.0') !== undefined ? tag : undefined;
}

export function versionWindow(current: string | undefined, target = TARGET): Window {
  const supported = `upgrades to ${target} are supported from ${OLDEST_SUPPORTED} or later (${OLDEST_SUPPORTED} … ${target})`;
  if (current === undefined)
    return {
      state: 'refused',
      reason: `the cluster's netplug version is unknown (no ClusterInformation, no versioned image): ${supported}`,
    };
  const fromOldest = compareVersions(current, OLDEST_SUPPORTED);
  if (fromOldest === undefined) return { state: 'refused', reason: `the cluster's version "${current}" is not a version: ${supported}` };
  if (fromOldest < 0)
    return {
      state: 'refused',
      reason: `the cluster runs ${current}, older than ${OLDEST_SUPPORTED}: ${supported}; upgrade to a release in between first`,
    };
  if ((compareVersions(current, target) as number) >= 0) return { state: 'current', from: current };
  return { state: 'upgrade', from: current };
}
