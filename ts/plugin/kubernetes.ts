// What Kubernetes says about the pod being added, in Kubernetes mode with `policy.type: k8s`: the
// pod (labels, service account, named ports, annotations) and its namespace (annotations), read
// at once, and the address plan their annotations make. Without `policy.type: k8s` nothing is
// read and annotations do not apply, as in the reference.
import { addressPlan, type AddressPlan } from '../k8s/annotations.ts';
import { readNamespace, readPod, type PodInfo } from '../k8s/objects.ts';
import type { PluginContext } from './context.ts';

export interface PodFacts {
  pod?: PodInfo;
  plan: AddressPlan;
}

export async function podFacts(ctx: PluginContext): Promise<PodFacts> {
  const { workload, conf } = ctx;
  if (!ctx.readsPod || !workload.pod) return { plan: {} };
  // Read early (while the netconf was validated) for this pod, else now.
  const [pod, namespace] = await (ctx.podReads?.result ??
    ctx
      .kube()
      .then((kube) => Promise.all([readPod(kube, workload.namespace, workload.pod as string), readNamespace(kube, workload.namespace)])));
  const plan = addressPlan({ pod, namespaceAnnotations: namespace.annotations, ipamType: conf.ipam.type, features: conf.feature_control });
  const from = ctx.podReads?.watched ? 'netplug-node watch' : 'API';
  ctx.log.debug('pod read from Kubernetes', { pod: `${pod.namespace}/${pod.name}`, from, labels: pod.labels, plan });
  return { pod, plan };
}
