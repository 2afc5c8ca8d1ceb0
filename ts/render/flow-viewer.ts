// netplug-flow-viewer (ts/viewer/): deploy/manifests/netplug-flow-viewer.yaml, applied beside
// netplug-flows.yaml. One replica, no API rights (no service account token mounted): it reads
// netplug-flows' write port as a reader, with a projected token for the audience netplug-flows
// that the aggregator's NETPLUG_FLOWS_READERS names. The page is served on the pod's loopback only,
// reached by `kubectl port-forward svc/netplug-flow-viewer 9449`: the Service names the port for
// that, while its cluster IP reaches nothing (no one but the port-forwarding user reads the flows).
// Kept a function of the install's options so that netplug-operator can render it for FlowViewer.
import { type KubeObject, labelsOf, type RenderOptions } from './objects.ts';

export const FLOW_VIEWER = 'netplug-flow-viewer';
/** ts/viewer/settings.ts's defaults (VIEWER_PORT, VIEWER_HEALTH_PORT, TOKEN_FILE). */
const VIEWER_PORT = 9449;
const VIEWER_HEALTH_PORT = 9450;
const TOKEN_DIR = '/var/run/secrets/netplug-flows';

export function renderFlowViewer(options: Pick<RenderOptions, 'namespace' | 'image'>): KubeObject[] {
  const { namespace } = options;
  const probe = (path: string) => ({ httpGet: { path, port: VIEWER_HEALTH_PORT } });
  return [
    { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name: FLOW_VIEWER, namespace }, automountServiceAccountToken: false },
    {
      apiVersion: 'v1',
      kind: 'Service',
      metadata: { name: FLOW_VIEWER, namespace, labels: labelsOf(FLOW_VIEWER) },
      spec: {
        selector: labelsOf(FLOW_VIEWER),
        ports: [{ name: 'http', port: VIEWER_PORT, targetPort: VIEWER_PORT, protocol: 'TCP' }],
      },
    },
    {
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      metadata: { name: FLOW_VIEWER, namespace, labels: labelsOf(FLOW_VIEWER) },
      spec: {
        replicas: 1,
        selector: { matchLabels: labelsOf(FLOW_VIEWER) },
        template: {
          metadata: {
            labels: labelsOf(FLOW_VIEWER),
            annotations: {
              'prometheus.io/scrape': 'true',
              'prometheus.io/port': String(VIEWER_HEALTH_PORT),
              'prometheus.io/path': '/metrics',
            },
          },
          spec: {
            nodeSelector: { 'kubernetes.io/os': 'linux' },
            serviceAccountName: FLOW_VIEWER,
            automountServiceAccountToken: false,
            // Service links on: netplug-flows' Service, created first, gives NETPLUG_FLOWS_SERVICE_HOST
            // and NETPLUG_FLOWS_SERVICE_PORT, the aggregator's address (NETPLUG_VIEWER_FLOWS_URL unset).
            enableServiceLinks: true,
            containers: [
              {
                name: FLOW_VIEWER,
                image: options.image,
                imagePullPolicy: 'IfNotPresent',
                command: [`/usr/bin/${FLOW_VIEWER}`],
                env: [
                  { name: 'NETPLUG_VIEWER_LISTEN', value: `127.0.0.1:${VIEWER_PORT}` },
                  { name: 'NETPLUG_VIEWER_HEALTH_ADDR', value: `0.0.0.0:${VIEWER_HEALTH_PORT}` },
                  { name: 'NETPLUG_VIEWER_TOKEN_FILE', value: `${TOKEN_DIR}/token` },
                ],
                ports: [{ name: 'metrics', containerPort: VIEWER_HEALTH_PORT, protocol: 'TCP' }],
                volumeMounts: [{ name: 'flows-token', mountPath: TOKEN_DIR, readOnly: true }],
                livenessProbe: { ...probe('/livez'), periodSeconds: 10, initialDelaySeconds: 10, failureThreshold: 6, timeoutSeconds: 10 },
                readinessProbe: { ...probe('/readyz'), periodSeconds: 5, timeoutSeconds: 10 },
                resources: { requests: { cpu: '10m', memory: '64Mi' } },
                securityContext: { allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, runAsNonRoot: true, runAsUser: 65534 },
              },
            ],
            volumes: [
              {
                name: 'flows-token',
                projected: { sources: [{ serviceAccountToken: { audience: 'netplug-flows', expirationSeconds: 3600, path: 'token' } }] },
              },
            ],
          },
        },
      },
    },
  ];
}
