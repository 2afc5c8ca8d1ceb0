// netplug-node's CNI socket through the addon (crates/netplug-cni-socket): Node's sockets cannot
// receive a descriptor, and the shim sends the pod's network namespace beside its request. The
// addon listens, accepts and reads each request; the connection's descriptor is then wrapped in a
// net.Socket for the rest of the conversation (ts/node/cni-frames.ts).
import { closeSync } from 'node:fs';
import { Socket } from 'node:net';

import { addon } from '../native/addon.ts';

export type Accepted = { fd: number } | { closed: true } | { failed: string };

export interface CniListener {
  /** The next connection (its descriptor, the caller's), or `closed` once close() was called. */
  accept(): Promise<Accepted>;
  /** Stops accepting: a waiting accept() resolves `closed`. */
  close(): void;
}

/** Listens on a unix socket at `path` (which must not exist). */
export function listenCni(path: string): CniListener {
  const listener = new (addon().CniListener)(path);
  return {
    accept: async () => {
      const outcome = await listener.accept();
      if (outcome.closed) return { closed: true };
      if (outcome.fd === undefined || outcome.fd === null) return { failed: outcome.error ?? 'accept(2) failed' };
      return { fd: outcome.fd };
    },
    close: () => listener.close(),
  };
}

/** A shim's request as read: its two frames, and the namespace's descriptor if one came beside them. */
export interface ReceivedRequest {
  header: Buffer;
  stdin: Buffer;
  /** The connection, for the rest of the conversation. */
  socket: Socket;
  /** The descriptor the shim sent beside the request (the pod's network namespace), the receiver's. */
  netns?: number;
}

/**
 * Reads the request on the connection `fd` (taken over), within `patienceMs`. On failure the
 * connection is closed and why is returned.
 */
export async function readRequest(fd: number, patienceMs: number): Promise<ReceivedRequest | { failed: string }> {
  const outcome = await addon()
    .readCniRequest(fd, patienceMs)
    .catch(
      (err: unknown) => ({ error: (err as Error).message }) as { error: string; header?: undefined; stdin?: undefined; netns?: undefined },
    );
  if (outcome.error !== undefined || !outcome.header || !outcome.stdin) {
    closeSync(fd);
    if (typeof outcome.netns === 'number') closeSync(outcome.netns);
    return { failed: outcome.error ?? 'no request' };
  }
  const socket = new Socket({ fd, readable: true, writable: true });
  return { header: outcome.header, stdin: outcome.stdin, socket, ...(typeof outcome.netns === 'number' ? { netns: outcome.netns } : {}) };
}
