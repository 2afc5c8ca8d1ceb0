// The helm procedure runs the `helm` binary (PATH, or --helm): `helm upgrade` with the release's
// namespace and chart version always given (the reference's docs omit both), `helm rollback` for
// the way back. A helm killed mid-upgrade leaves its release `pending-upgrade`, which blocks every
// later helm operation; the upgrade record says that revision was ours, so it is removed and the
// upgrade redone.
import { execFile } from 'node:child_process';
import { setTimeout as sleep } from 'node:timers/promises';

import { findHelmRelease } from './detect.ts';
import type { UpgradeKube } from './kube.ts';

export interface HelmTarget {
  release: string;
  namespace: string;
  chart: string;
  version: string;
  binary: string;
}

export function runHelm(binary: string, args: string[], kubeconfig: string | undefined, signal: AbortSignal): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(
      binary,
      [...args, ...(kubeconfig ? ['--kubeconfig', kubeconfig] : [])],
      { signal, maxBuffer: 16 << 20, env: { ...process.env } },
      (err, stdout, stderr) => {
        if (err) {
          const detail = stderr.trim().split('\n').pop() || err.message;
          reject(new Error(`helm ${args.slice(0, 2).join(' ')}: ${detail}`));
        } else resolve(stdout);
      },
    );
  });
}

/** `helm upgrade`, unless the release already runs the target chart version. */
export async function helmUpgrade(kube: UpgradeKube, helm: HelmTarget, fromRevision: number, signal: AbortSignal): Promise<string> {
  let release = await findHelmRelease(kube);
  // A pending revision after ours began is our own helm: still running (a killed netplugctl leaves
  // its helm child running on), or killed itself. Given time to finish; else its revision, which
  // never will, is removed so helm accepts the upgrade again.
  for (let waited = 0; release && release.revision > fromRevision && release.status.startsWith('pending-') && waited < 120; waited += 2) {
    await sleep(2000, undefined, { signal });
    release = await findHelmRelease(kube);
  }
  if (release && release.revision > fromRevision && release.status.startsWith('pending-')) {
    await kube.delete({
      apiVersion: 'v1',
      kind: 'Secret',
      name: `sh.helm.release.v1.${helm.release}.v${release.revision}`,
      namespace: helm.namespace,
    });
    release = await findHelmRelease(kube);
  }
  if (release && release.chartVersion === helm.version && release.status === 'deployed' && release.revision > fromRevision)
    return `release ${helm.namespace}/${helm.release} already at chart ${helm.version} (revision ${release.revision})`;
  await runHelm(
    helm.binary,
    ['upgrade', helm.release, helm.chart, '-n', helm.namespace, '--version', helm.version],
    kube.kubeconfigPath,
    signal,
  );
  const after = await findHelmRelease(kube);
  return `release ${helm.namespace}/${helm.release} revision ${after?.revision} ${after?.status}, chart ${after?.chartVersion}`;
}
