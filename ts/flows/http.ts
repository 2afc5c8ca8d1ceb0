// The HTTP plumbing netplug-flows and netplug-flow-viewer share: listening, closing with every
// connection, JSON answers, and refusals that let a client still sending its body see them.
import type { IncomingMessage, OutgoingHttpHeaders, Server, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export type Address = { host: string; port: number };

/** What a refused request's body may still send before its connection is cut. */
const DRAIN_BYTES = 8 * 1024 * 1024;

/** Listens on `address`; resolves to where (the port chosen when 0 was asked). */
export function listen(server: Server, address: Address): Promise<Address> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(address.port, address.host, () => {
      server.off('error', reject);
      resolve({ host: address.host, port: (server.address() as AddressInfo).port });
    });
  });
}

/** Stops listening and ends every connection, followers' streams included. */
export function close(server: Server): Promise<void> {
  return new Promise((resolve) => {
    server.close(() => resolve());
    server.closeAllConnections();
  });
}

export function send(response: ServerResponse, status: number, body: unknown, headers: OutgoingHttpHeaders = {}): void {
  response.writeHead(status, { 'Content-Type': 'application/json', 'Cache-Control': 'no-store', ...headers });
  response.end(`${JSON.stringify(body)}\n`);
}

/**
 * Answers `status` with `{"error": message}` before the body is read: the connection closes
 * after it, and what the client still sends is read (up to DRAIN_BYTES), so that a client still
 * writing sees the answer rather than a reset.
 */
export function reject(
  request: IncomingMessage,
  response: ServerResponse,
  status: number,
  message: string,
  headers: OutgoingHttpHeaders = {},
) {
  const unread = !request.complete && !request.readableEnded;
  send(response, status, { error: message }, unread ? { ...headers, Connection: 'close' } : headers);
  if (!unread) return;
  let drained = 0;
  request.on('data', (chunk: Buffer) => {
    drained += chunk.length;
    if (drained > DRAIN_BYTES) request.destroy();
  });
  request.resume();
}

/** The bearer token of `Authorization`, if any. */
export const bearerToken = (request: IncomingMessage): string | undefined =>
  /^Bearer\s+(\S+)\s*$/i.exec(request.headers.authorization ?? '')?.[1];
