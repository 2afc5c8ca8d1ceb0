// The benchmarks' Deployment under a real kubelet: busybox sleeping, the image only from the node
// (never pulled), 1 s to stop; optionally spread evenly over the nodes.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';

import { BUSYBOX_IMAGE, type Cluster } from '../../scripts/lib/cluster.ts';

/** Writes the Deployment `bench` (label app=bench) of `replicas` into the cluster's directory; its file. */
export function benchDeploymentFile(c: Cluster, replicas: number, options: { spreadOverNodes?: boolean } = {}): string {
  const labels = { app: 'bench' };
  const spread = {
    topologySpreadConstraints: [
      { maxSkew: 1, topologyKey: 'kubernetes.io/hostname', whenUnsatisfiable: 'DoNotSchedule', labelSelector: { matchLabels: labels } },
    ],
  };
  const deployment = {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name: 'bench', labels },
    spec: {
      replicas,
      selector: { matchLabels: labels },
      template: {
        metadata: { labels },
        spec: {
          terminationGracePeriodSeconds: 1,
          ...(options.spreadOverNodes ? spread : {}),
          containers: [{ name: 'busybox', image: BUSYBOX_IMAGE, imagePullPolicy: 'Never', command: ['sleep', '3600'] }],
        },
      },
    },
  };
  const file = join(c.dir, 'bench-deployment.json');
  writeFileSync(file, JSON.stringify(deployment));
  return file;
}
