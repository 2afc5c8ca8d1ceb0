// The Kubernetes part of early work: for a pod's ADD with `policy.type: k8s`, connect to the API
// and read the pod and its namespace while the netconf is validated (the TLS handshake and both
// reads run on the connection's own thread). A guess that validation confirms: the ADD uses the
// client and the reads only if the validated netconf names the same API settings.
import type { CniEnvironment, Command } from '../cni/environment.ts';
import { openKubeClient, type KubeClient } from '../k8s/client.ts';
import type { KubernetesSettings } from '../k8s/kubeconfig.ts';
import { readNamespace, readPod, type NamespaceInfo, type PodInfo } from '../k8s/objects.ts';
import { handled } from './early.ts';

export interface PodReads {
  /** The API settings the reads were made with, as JSON. */
  settings: string;
  kube: Promise<KubeClient>;
  result: Promise<[PodInfo, NamespaceInfo]>;
}

export function startKubeWork(command: Command, env: CniEnvironment, json: Record<string, unknown> | undefined): PodReads | undefined {
  const { podNamespace, podName } = env.args;
  if (command !== 'ADD' || !json || !podNamespace || !podName) return undefined;
  const policy = json['policy'] as { type?: unknown } | undefined;
  const settings = apiSettings(json['kubernetes']);
  if (policy?.type !== 'k8s' || !settings) return undefined;
  const kube = handled(openKubeClient(settings));
  kube.then(
    (k) => k.warmUp(),
    () => undefined,
  );
  const result = handled(kube.then((k) => Promise.all([readPod(k, podNamespace, podName), readNamespace(k, podNamespace)])));
  return { settings: sameSettingsKey(settings), kube, result };
}

/** The settings used to reach the API, for comparing the guess with the validated netconf. */
export const sameSettingsKey = (settings: KubernetesSettings): string =>
  JSON.stringify([settings.kubeconfig ?? null, settings.k8s_api_root ?? null]);

function apiSettings(value: unknown): KubernetesSettings | undefined {
  if (!value || typeof value !== 'object') return undefined;
  const { kubeconfig, k8s_api_root } = value as Record<string, unknown>;
  if ((kubeconfig !== undefined && typeof kubeconfig !== 'string') || (k8s_api_root !== undefined && typeof k8s_api_root !== 'string'))
    return undefined;
  if (!kubeconfig && !k8s_api_root) return undefined;
  return { ...(kubeconfig ? { kubeconfig } : {}), ...(k8s_api_root ? { k8s_api_root } : {}) };
}
