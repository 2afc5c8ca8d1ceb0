// How the policy, profile and workloadendpoint controllers name the objects they reconcile:
// `<namespace>/<name>`, or the name of a cluster-wide object (as the informers' caches do).
import type * as k8s from '@kubernetes/client-node';

export const objectKey = (object: k8s.KubernetesObject): string =>
  object.metadata?.namespace ? `${object.metadata.namespace}/${object.metadata.name ?? ''}` : (object.metadata?.name ?? '');

export function splitKey(key: string): { namespace?: string; name: string } {
  const slash = key.indexOf('/');
  return slash < 0 ? { name: key } : { namespace: key.slice(0, slash), name: key.slice(slash + 1) };
}
