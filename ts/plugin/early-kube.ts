// The Kubernetes part of early work: for a pod's ADD with `policy.type: k8s`, connect to the API
// and read the pod and its namespace while the rest of the command loads (the TLS handshake and
// both reads run on the connection's own thread), with the validated netconf's API settings. In
// netplug-node, a pod its watch already holds is not read at all.
import type { CniEnvironment } from '../cni/environment.ts';
import type { Netconf } from '../config/netconf.ts';
import { openKubeClient, type KubeClient } from '../k8s/client.ts';
import { readNamespace, readPod, type NamespaceInfo, type PodInfo } from '../k8s/objects.ts';
import { handled } from './handled.ts';
import type { PluginServices } from './services.ts';

export interface PodReads {
  /** The client the reads went through; none when the pod came from netplug-node's watch. */
  kube?: Promise<KubeClient>;
  result: Promise<[PodInfo, NamespaceInfo]>;
  /** Whether they came from netplug-node's watch rather than from GETs. */
  watched: boolean;
}

/** The pod's reads, if this ADD will make them: a pod, `policy.type` k8s, and a way to the API. */
export function startKubeWork(env: CniEnvironment, conf: Netconf, services?: PluginServices): PodReads | undefined {
  const { podNamespace, podName, podUid } = env.args;
  const settings = conf.kubernetes;
  if (!podNamespace || !podName || conf.policy?.type !== 'k8s' || !(settings?.kubeconfig || settings?.k8s_api_root)) return undefined;
  const watched = podUid ? services?.watchedPod?.(podNamespace, podName, podUid) : undefined;
  // Nothing to read: no client either (a command that needs one later gets it from the context).
  if (watched) return { result: Promise.resolve(watched), watched: true };
  const kube = handled(services?.kube?.(settings) ?? openKubeClient(settings));
  kube.then(
    (k) => k.warmUp(),
    () => undefined,
  );
  const result = handled(kube.then((k) => Promise.all([readPod(k, podNamespace, podName), readNamespace(k, podNamespace)])));
  return { kube, result, watched: false };
}
