// Deployment netplug-kube-controllers: one replica (Recreate: two never run at once) that releases
// what deleted pods and nodes left behind, and keeps etcd-mode node labels in sync.
import { datastoreEnv, etcdSecretMount, etcdSecretVolume } from './config.ts';
import { CONTROLLERS, type KubeObject, labelsOf, type RenderOptions } from './objects.ts';

export const CONTROLLERS_HEALTH_PORT = 9094;

export function renderControllers(options: RenderOptions): KubeObject {
  const etcd = options.datastore === 'etcdv3';
  const probe = (path: string) => ({ httpGet: { path, port: CONTROLLERS_HEALTH_PORT } });
  return {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name: CONTROLLERS, namespace: options.namespace, labels: labelsOf(CONTROLLERS) },
    spec: {
      replicas: 1,
      strategy: { type: 'Recreate' },
      selector: { matchLabels: labelsOf(CONTROLLERS) },
      template: {
        metadata: { labels: labelsOf(CONTROLLERS) },
        spec: {
          nodeSelector: { 'kubernetes.io/os': 'linux' },
          tolerations: [
            { key: 'CriticalAddonsOnly', operator: 'Exists' },
            { key: 'node-role.kubernetes.io/control-plane', effect: 'NoSchedule' },
          ],
          serviceAccountName: CONTROLLERS,
          priorityClassName: 'system-cluster-critical',
          containers: [
            {
              name: CONTROLLERS,
              image: options.image,
              imagePullPolicy: 'IfNotPresent',
              command: ['/usr/bin/netplug-kube-controllers'],
              env: [
                ...datastoreEnv(options),
                { name: 'ENABLED_CONTROLLERS', value: 'node,ipam' },
                { name: 'NETPLUG_CONTROLLERS_HEALTH_ADDR', value: `0.0.0.0:${CONTROLLERS_HEALTH_PORT}` },
              ],
              volumeMounts: etcd ? [etcdSecretMount] : [],
              livenessProbe: { ...probe('/liveness'), periodSeconds: 10, initialDelaySeconds: 10, failureThreshold: 6, timeoutSeconds: 10 },
              readinessProbe: { ...probe('/readiness'), periodSeconds: 5, timeoutSeconds: 10 },
              resources: { requests: { cpu: '20m', memory: '64Mi' } },
            },
          ],
          volumes: etcd ? [etcdSecretVolume] : [],
        },
      },
    },
  };
}
