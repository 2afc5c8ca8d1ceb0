// netplug-node's CNI socket through the addon (crates/netplug-cni-socket): Node's sockets cannot
// receive a descriptor, and the shim sends the pod's network namespace beside its request. The
// addon listens, accepts and reads each request on threads of its own, and hands it over whole;
// the connection's descriptor is then wrapped in a net.Socket for the rest of the conversation
// (ts/node/cni/cni-frames.ts).
import { closeSync } from 'node:fs';
import { Socket } from 'node:net';

import { addon } from '../native/addon.ts';

/** A shim's request as read: its two frames, and the namespace's descriptor if one came beside them. */
export interface ReceivedRequest {
  header: Buffer;
  stdin: Buffer;
  /** The connection, for the rest of the conversation. */
  socket: Socket;
  /** The descriptor the shim sent beside the request (the pod's network namespace), the receiver's. */
  netns?: number;
  /** When the connection was accepted, in milliseconds on the monotonic clock. */
  acceptedAt?: number;
}

export interface CniListener {
  /** Stops accepting; `closed` is called once the requests being read meanwhile are settled. */
  close(): void;
}

/**
 * Listens on a unix socket at `path` (which must not exist). Each request read whole within
 * `patienceMs` goes to `onRequest`; after close(), `onClosed` once.
 */
export function listenCni(
  path: string,
  patienceMs: number,
  onRequest: (request: ReceivedRequest) => void,
  onClosed: () => void,
): CniListener {
  const listener = new (addon().CniListener)(path, patienceMs, (request) => {
    if (request.fd === undefined || request.fd === null) return onClosed();
    if (!request.header || !request.stdin) {
      closeSync(request.fd);
      if (typeof request.netns === 'number') closeSync(request.netns);
      return;
    }
    const socket = new Socket({ fd: request.fd, readable: true, writable: true });
    onRequest({
      header: request.header,
      stdin: request.stdin,
      socket,
      ...(typeof request.netns === 'number' ? { netns: request.netns } : {}),
      ...(typeof request.acceptedAt === 'number' ? { acceptedAt: request.acceptedAt } : {}),
    });
  });
  return { close: () => listener.close() };
}
