// What the network-policy files under the real kubelet share: busybox servers (httpd on port 80,
// probed by the kubelet) and a client in one namespace, Kubernetes NetworkPolicies, and probes of
// whether the client gets a server's page, with real packets from the client pod.
import type { Cluster } from '../helpers/cluster.ts';
import { BUSYBOX_IMAGE, getJson } from '../helpers/cluster.ts';
import { eventually } from './install.ts';

export function serverPod(namespace: string, name: string, role: string) {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, namespace, labels: { app: 'server', role } },
    spec: {
      terminationGracePeriodSeconds: 1,
      containers: [
        {
          name: 'httpd',
          image: BUSYBOX_IMAGE,
          imagePullPolicy: 'Never',
          command: ['sh', '-c', `mkdir -p /www && echo ${name} > /www/index.html && exec httpd -f -p 80 -h /www`],
          // The kubelet probes from the node: policy lets the node reach its pods.
          readinessProbe: { httpGet: { path: '/', port: 80 }, periodSeconds: 1, failureThreshold: 1, timeoutSeconds: 1 },
        },
      ],
    },
  };
}

export function clientPod(namespace: string) {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: 'client', namespace, labels: { app: 'client' } },
    spec: {
      terminationGracePeriodSeconds: 1,
      containers: [{ name: 'main', image: BUSYBOX_IMAGE, imagePullPolicy: 'Never', command: ['sleep', '3600'] }],
    },
  };
}

export function networkPolicy(namespace: string, name: string, spec: object) {
  return { apiVersion: 'networking.k8s.io/v1', kind: 'NetworkPolicy', metadata: { name, namespace }, spec };
}

/** Probes from the client pod of `namespace`; `lastFailure` is the last failed probe's message, for a failure's log. */
export function policyProbes(cluster: () => Cluster, namespace: string) {
  const probes = {
    lastFailure: '',
    podIp: async (name: string) => (await getJson(cluster(), 'pod', '-n', namespace, name)).status.podIP as string,
    /** Whether the client gets the server's page (busybox httpd over TCP): a refused or dropped connection does not. */
    async reaches(name: string): Promise<boolean> {
      const address = await probes.podIp(name);
      try {
        // busybox-static's wget crashes on this host; nc speaks the HTTP request instead.
        const body = await cluster().kubectl(
          'exec',
          '-n',
          namespace,
          'client',
          '--',
          'sh',
          '-c',
          `printf 'GET / HTTP/1.0\\r\\n\\r\\n' | nc -w 3 ${address} 80`,
        );
        return body.trim().endsWith(`\n${name}`);
      } catch (err) {
        probes.lastFailure = `client → ${name} (${address}): ${(err as Error).message}`;
        return false;
      }
    },
    /** Connectivity settles on `expected` and stays so for two more tries. */
    async settles(name: string, expected: boolean): Promise<boolean> {
      await eventually(
        `client → ${name} ${expected ? 'connects' : 'is blocked'}`,
        async () => (await probes.reaches(name)) === expected,
        60,
      );
      return (await probes.reaches(name)) === expected && (await probes.reaches(name)) === expected;
    },
  };
  return probes;
}
