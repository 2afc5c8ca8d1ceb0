// `netplugctl flows` without --server: netplug-flows' read port reached through the API server's
// port-forward, as `kubectl port-forward` reaches it (the API server authorizes it as `create` on
// pods/portforward). A listener on 127.0.0.1 (a port of the system's choosing) forwards each
// connection made to it over a port-forward stream (@kubernetes/client-node's PortForward) to the
// read port of a ready pod labelled k8s-app=netplug-flows; the port is the one the pod's
// NETPLUG_FLOWS_READ_LISTEN names, else the default.
//
// API: `forwardToFlows(config, namespace)` → { url, pod, problem(), close() }.
import { createServer, type Socket } from 'node:net';
import { Writable } from 'node:stream';

import * as k8s from '@kubernetes/client-node';

import { describeError } from '../runtime/errors.ts';
import { FLOWS_READ_PORT } from './settings.ts';

/** The label of netplug-flows' pods. */
export const FLOWS_LABEL = 'k8s-app=netplug-flows';

export interface Forward {
  /** http://127.0.0.1:<port>, forwarded to the pod's read port. */
  url: string;
  /** `<namespace>/<name>:<port>` of the pod it forwards to. */
  pod: string;
  /** What the last failed forward said (the API server's or the kubelet's words), if one failed. */
  problem(): string | undefined;
  close(): Promise<void>;
}

/** No pod to forward to: the message says where it looked. */
class FlowsNotFound extends Error {
  override readonly name = 'FlowsNotFound';
}

export async function forwardToFlows(config: k8s.KubeConfig, namespace: string): Promise<Forward> {
  const core = config.makeApiClient(k8s.CoreV1Api);
  const pods = (await core.listNamespacedPod({ namespace, labelSelector: FLOWS_LABEL })).items;
  const ready = pods.filter(
    (pod) => !pod.metadata?.deletionTimestamp && pod.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True'),
  );
  const pod = ready[0];
  const name = pod?.metadata?.name;
  if (!pod || !name)
    throw new FlowsNotFound(
      `no ready pod labelled ${FLOWS_LABEL} in namespace ${namespace}${pods.length > 0 ? ` (${pods.length} not ready)` : ''}: is netplug-flows running? (--flows-namespace NS names its namespace; --server URL a port-forward of your own)`,
    );
  const port = readPort(pod);
  const forwarder = new k8s.PortForward(config);
  let problem: string | undefined;
  const sockets = new Set<Socket>();
  const server = createServer((socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => socket.destroy());
    const errors = new Writable({
      write(chunk: Buffer, _encoding, done) {
        const text = chunk.toString('utf8').trim();
        if (text) problem = text;
        done();
      },
    });
    forwarder
      .portForward(namespace, name, [port], socket, errors, socket)
      .then((opened) => {
        const ws = typeof opened === 'function' ? opened() : opened;
        if (!ws) return socket.destroy();
        ws.on('close', () => socket.end());
        ws.on('error', (err: Error) => {
          problem = describeError(err);
          socket.destroy();
        });
        socket.on('close', () => ws.close());
      })
      .catch((err: unknown) => {
        problem = describeError(err);
        socket.destroy();
      });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      server.off('error', reject);
      resolve();
    });
  });
  const address = server.address();
  const local = typeof address === 'object' && address ? address.port : 0;
  return {
    url: `http://127.0.0.1:${local}`,
    pod: `${namespace}/${name}:${port}`,
    problem: () => problem,
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}

/** The port of the pod's NETPLUG_FLOWS_READ_LISTEN (a value in its spec), else the default. */
function readPort(pod: k8s.V1Pod): number {
  for (const container of pod.spec?.containers ?? []) {
    const value = container.env?.find((variable) => variable.name === 'NETPLUG_FLOWS_READ_LISTEN')?.value;
    const port = Number(/:(\d{1,5})$/.exec(value?.trim() ?? '')?.[1]);
    if (port > 0 && port <= 65535) return port;
  }
  return FLOWS_READ_PORT;
}
