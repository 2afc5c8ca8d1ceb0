// netplug-flows, the flow-log aggregator (ts/flows/): deploy/manifests/netplug-flows.yaml, applied
// beside a manifest install to turn flow logs on (netplug-config's flow_logs "true", then a restart
// of netplug-node). One replica: it keeps a bounded window of records in memory. Nodes post to the
// Service's one port, the write port; reads stay on the pod's loopback, reached by port-forward
// (`netplugctl flows` finds the pod by its k8s-app label), and on the write port to the flow
// viewer's service account (NETPLUG_FLOWS_READERS). Writers are netplug-node's service account,
// whose tokens (audience netplug-flows), and the readers', it checks by TokenReview: its only right.
// netplug-operator renders the same objects in netplug-system for FlowLogAggregator "default".
import { FLOW_VIEWER } from './flow-viewer.ts';
import { type KubeObject, labelsOf, NODE, type RenderOptions } from './objects.ts';

export const FLOWS = 'netplug-flows';
/**
 * ts/flows/settings.ts's defaults (FLOWS_WRITE_PORT, FLOWS_READ_PORT, FLOWS_HEALTH_PORT) and the
 * audience its writers' tokens are issued for (FLOWS_AUDIENCE).
 */
export const FLOWS_WRITE_PORT = 9445;
const FLOWS_READ_PORT = 9446;
const FLOWS_HEALTH_PORT = 9447;
export const FLOWS_AUDIENCE = 'netplug-flows';

/** What the aggregator keeps (NETPLUG_FLOWS_RETENTION, NETPLUG_FLOWS_MAX_BYTES): the operator's FlowLogAggregator spec. */
export interface FlowsWindow {
  /** A duration such as 2h (the default). */
  retention?: string;
  /** Bytes, or a quantity such as 64Mi (the default). */
  maxBytes?: string | number;
}

export function renderFlows(options: RenderOptions, window: FlowsWindow = {}): KubeObject[] {
  const { namespace } = options;
  const probe = (path: string) => ({ httpGet: { path, port: FLOWS_HEALTH_PORT } });
  const rbac = (kind: string, rest: object): KubeObject => ({
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind,
    metadata: { name: FLOWS },
    ...rest,
  });
  return [
    { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name: FLOWS, namespace } },
    // The writers' tokens are reviewed with its own credentials; it reads nothing else.
    rbac('ClusterRole', { rules: [{ apiGroups: ['authentication.k8s.io'], resources: ['tokenreviews'], verbs: ['create'] }] }),
    rbac('ClusterRoleBinding', {
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: FLOWS },
      subjects: [{ kind: 'ServiceAccount', name: FLOWS, namespace }],
    }),
    {
      apiVersion: 'v1',
      kind: 'Service',
      metadata: { name: FLOWS, namespace, labels: labelsOf(FLOWS) },
      spec: {
        selector: labelsOf(FLOWS),
        // IPv4 only: netplug-node, on the host network, reaches it by NETPLUG_FLOWS_SERVICE_HOST
        // (ts/render/node.ts), which an IPv6 address would need brackets around in its URL. On a
        // cluster without IPv4 services the API server refuses this Service.
        ipFamilyPolicy: 'SingleStack',
        ipFamilies: ['IPv4'],
        // The write port only: records are read on the pod's loopback.
        ports: [{ name: 'write', port: FLOWS_WRITE_PORT, targetPort: 'write', protocol: 'TCP' }],
      },
    },
    {
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      metadata: { name: FLOWS, namespace, labels: labelsOf(FLOWS) },
      spec: {
        replicas: 1,
        strategy: { type: 'RollingUpdate', rollingUpdate: { maxSurge: 1, maxUnavailable: 0 } },
        selector: { matchLabels: labelsOf(FLOWS) },
        template: {
          metadata: {
            labels: labelsOf(FLOWS),
            annotations: {
              // For a Prometheus that discovers pods by these (the common kubernetes-pods scrape job).
              'prometheus.io/scrape': 'true',
              'prometheus.io/port': String(FLOWS_HEALTH_PORT),
              'prometheus.io/path': '/metrics',
            },
          },
          spec: {
            nodeSelector: { 'kubernetes.io/os': 'linux' },
            serviceAccountName: FLOWS,
            // No service links: its own Service's would be NETPLUG_FLOWS_PORT and the like, beside its settings.
            enableServiceLinks: false,
            containers: [
              {
                name: FLOWS,
                image: options.image,
                imagePullPolicy: 'IfNotPresent',
                command: [`/usr/bin/${FLOWS}`],
                env: [
                  { name: 'NETPLUG_FLOWS_LISTEN', value: `:${FLOWS_WRITE_PORT}` },
                  { name: 'NETPLUG_FLOWS_READ_LISTEN', value: `127.0.0.1:${FLOWS_READ_PORT}` },
                  { name: 'NETPLUG_FLOWS_HEALTH_ADDR', value: `0.0.0.0:${FLOWS_HEALTH_PORT}` },
                  // netplug-node's service account in this install's namespace.
                  { name: 'NETPLUG_FLOWS_WRITERS', value: `${namespace}:${NODE}` },
                  // The flow viewer's service account (ts/render/flow-viewer.ts) reads on the write port.
                  { name: 'NETPLUG_FLOWS_READERS', value: `${namespace}:${FLOW_VIEWER}` },
                  { name: 'NETPLUG_FLOWS_RETENTION', value: window.retention ?? '2h' },
                  { name: 'NETPLUG_FLOWS_MAX_BYTES', value: String(window.maxBytes ?? '64Mi') },
                ],
                ports: [
                  { name: 'write', containerPort: FLOWS_WRITE_PORT, protocol: 'TCP' },
                  { name: 'metrics', containerPort: FLOWS_HEALTH_PORT, protocol: 'TCP' },
                ],
                livenessProbe: { ...probe('/livez'), periodSeconds: 10, initialDelaySeconds: 10, failureThreshold: 6, timeoutSeconds: 10 },
                readinessProbe: { ...probe('/readyz'), periodSeconds: 5, timeoutSeconds: 10 },
                // The window holds up to NETPLUG_FLOWS_MAX_BYTES of records.
                resources: { requests: { cpu: '20m', memory: '128Mi' } },
              },
            ],
          },
        },
      },
    },
  ];
}
