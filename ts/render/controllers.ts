// Deployment netplug-kube-controllers: releases what deleted pods and nodes left behind, and keeps
// etcd-mode node labels in sync. Replicas elect a leader on a Lease in their namespace (only the
// holder reconciles), so a rolling update starts the new pod beside the old one, which releases
// the Lease when it stops. Health and metrics on one port: the probes, and Prometheus.
// On etcd it runs in the host's network: a pod's profiles (kns.<namespace>, ksa.<namespace>.<name>)
// are made in etcd by these controllers, and without them netplug-node's policy lets none of the
// pod's packets through, so a pod of theirs could reach neither etcd nor the API to make them. Its
// port is then the node's: the old pod goes before the new one starts (Recreate).
import { datastoreEnv, etcdSecretMount, etcdSecretVolume } from './config.ts';
import { CONTROLLERS, type KubeObject, labelsOf, type RenderOptions } from './objects.ts';

const CONTROLLERS_HEALTH_PORT = 9094;

export function renderControllers(options: RenderOptions): KubeObject {
  const etcd = options.datastore === 'etcdv3';
  const probe = (path: string) => ({ httpGet: { path, port: CONTROLLERS_HEALTH_PORT } });
  return {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name: CONTROLLERS, namespace: options.namespace, labels: labelsOf(CONTROLLERS) },
    spec: {
      replicas: 1,
      strategy: etcd ? { type: 'Recreate' } : { type: 'RollingUpdate', rollingUpdate: { maxSurge: 1, maxUnavailable: 0 } },
      selector: { matchLabels: labelsOf(CONTROLLERS) },
      template: {
        metadata: {
          labels: labelsOf(CONTROLLERS),
          annotations: {
            // For a Prometheus that discovers pods by these (the common kubernetes-pods scrape job).
            'prometheus.io/scrape': 'true',
            'prometheus.io/port': String(CONTROLLERS_HEALTH_PORT),
            'prometheus.io/path': '/metrics',
          },
        },
        spec: {
          ...(etcd ? { hostNetwork: true } : {}),
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
                // On etcd, the controllers that copy network policies, namespaces, service accounts and pod
                // labels into the datastore (policy.type k8s, as every netconf netplug ships has).
                { name: 'ENABLED_CONTROLLERS', value: etcd ? 'node,ipam,policy,profile,workloadendpoint' : 'node,ipam' },
                { name: 'NETPLUG_CONTROLLERS_HEALTH_ADDR', value: `0.0.0.0:${CONTROLLERS_HEALTH_PORT}` },
                // The Lease's namespace and this replica's name in it.
                { name: 'POD_NAMESPACE', valueFrom: { fieldRef: { fieldPath: 'metadata.namespace' } } },
                { name: 'POD_NAME', valueFrom: { fieldRef: { fieldPath: 'metadata.name' } } },
              ],
              ports: [{ name: 'metrics', containerPort: CONTROLLERS_HEALTH_PORT, protocol: 'TCP' }],
              volumeMounts: etcd ? [etcdSecretMount] : [],
              livenessProbe: { ...probe('/livez'), periodSeconds: 10, initialDelaySeconds: 10, failureThreshold: 6, timeoutSeconds: 10 },
              readinessProbe: { ...probe('/readyz'), periodSeconds: 5, timeoutSeconds: 10 },
              resources: { requests: { cpu: '20m', memory: '64Mi' } },
            },
          ],
          volumes: etcd ? [etcdSecretVolume] : [],
        },
      },
    },
  };
}
