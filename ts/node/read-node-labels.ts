// The Kubernetes Node's labels, read once (start-up); follow-node.ts keeps them in sync after.
import * as k8s from '@kubernetes/client-node';

import type { Logger } from '../log/logger.ts';

/** The labels; none when the Node does not exist (yet), which is logged. Other failures are thrown. */
export async function readNodeLabels(kube: k8s.KubeConfig, name: string, log: Logger): Promise<Record<string, string>> {
  // Listed by name, as follow-node.ts watches it: one permission (list) for both.
  const list = await kube.makeApiClient(k8s.CoreV1Api).listNode({ fieldSelector: `metadata.name=${name}` });
  const node = list.items[0];
  if (!node) log.warning(`the Kubernetes Node "${name}" does not exist (yet): registered without labels`);
  return node?.metadata?.labels ?? {};
}
