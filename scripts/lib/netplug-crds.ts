// Installs netplug's custom resource definitions (deploy/crds/) as an operator would, and waits
// until the API server serves them: for the tests and the benchmarks.
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

import * as k8s from '@kubernetes/client-node';

const CRDS = new URL('../../deploy/crds/', import.meta.url).pathname;

export async function installCrds(adminKubeconfig: string): Promise<void> {
  const config = new k8s.KubeConfig();
  config.loadFromFile(adminKubeconfig);
  const extensions = config.makeApiClient(k8s.ApiextensionsV1Api);
  const crds = readdirSync(CRDS).map((file) => k8s.loadYaml<k8s.V1CustomResourceDefinition>(readFileSync(join(CRDS, file), 'utf8')));
  await Promise.all(crds.map((body) => extensions.createCustomResourceDefinition({ body })));
  for (const crd of crds) {
    const name = crd.metadata?.name as string;
    while (
      !(await extensions.readCustomResourceDefinition({ name })).status?.conditions?.some(
        (c) => c.type === 'Established' && c.status === 'True',
      )
    ) {
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }
}
