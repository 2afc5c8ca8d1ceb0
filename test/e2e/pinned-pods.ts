// A web pod pinned to each node of a test cluster (scripts/lib/cluster-nodes.ts), for the tests
// that send real packets between nodes: busybox's httpd on 8080 serving /hello (the pod's name) and
// /blob (4 MiB of random bytes, for bulk transfers).
import { apply, BUSYBOX_IMAGE, type Cluster } from '../helpers/cluster.ts';

const SERVE =
  'mkdir -p /www && hostname > /www/hello && dd if=/dev/urandom of=/www/blob bs=1024 count=4096 2>/dev/null && exec httpd -f -p 8080 -h /www';

/**
 * Creates pod-1 … pod-N, pod-K on node K, labelled app=`app` and pod=pod-K, and waits until all are
 * Ready. `hostPort`: that node's pod (its index from 0) is also published on the port.
 */
export async function startPinnedWebPods(c: Cluster, app: string, hostPort?: { nodeIndex: number; port: number }): Promise<void> {
  await apply(
    c,
    ...c.nodes.map((node, index) => ({
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: `pod-${index + 1}`, labels: { app, pod: `pod-${index + 1}` } },
      spec: {
        nodeName: node.name,
        terminationGracePeriodSeconds: 1,
        containers: [
          {
            name: 'web',
            image: BUSYBOX_IMAGE,
            imagePullPolicy: 'Never',
            command: ['sh', '-c', SERVE],
            ...(hostPort?.nodeIndex === index ? { ports: [{ containerPort: 8080, hostPort: hostPort.port }] } : {}),
          },
        ],
      },
    })),
  );
  await c.kubectl('wait', '--for=condition=Ready', 'pod', '-l', `app=${app}`, '--timeout=180s');
}
