// A TCP relay in front of a test's real server (etcd, the API server), the one every test uses:
// - forward: clients connect here instead of the server;
// - close and open again on the same port: dropping its connections and refusing new ones, as an
//   unreachable server;
// - hold what clients send (or both ways) and then cut: a request reaches neither the server nor
//   the client's reply, as the network loses the packets of a host that died. It stops a client
//   mid-commit at a known point, so a test of a crash need not race it.
// Run as a program (`node relay.ts <listen> <target>...`), it forwards between network namespaces
// (test/helpers/nodes.ts): a test process blocked in spawnSync could not relay.
import { readFileSync, writeFileSync } from 'node:fs';
import { connect, createServer, type Server, type Socket } from 'node:net';
import { basename, join } from 'node:path';

import type { ExecutionContext } from 'ava';

/** A port on the loopback, or a unix socket's path. */
type Endpoint = number | string;

export interface Relay {
  /** Its port on the loopback. */
  port: number;
  /** `127.0.0.1:<port>`: where clients connect instead of the server. */
  address: string;
  /** Listens again on the same port. */
  open(): Promise<void>;
  /** Drops every connection and refuses new ones, as an unreachable server. */
  close(): Promise<void>;
  /**
   * From now on, what clients send is kept here, not forwarded; with 'both ways', what the server
   * sends too (a network that silently lost the host: nothing arrives, nothing closes).
   */
  hold(direction?: 'to server' | 'both ways'): void;
  /** Drops every connection and what it held; new connections are relayed again. */
  cut(): void;
  /** Relays again, closing nothing: what was held is lost, as a network that came back loses it. */
  release(): void;
}

interface Held {
  toServer: boolean;
  toClient: boolean;
}

const forwarding: Held = { toServer: false, toClient: false };

/** A server relaying each connection to `target`; `links` holds the live ones (both sockets). */
function relayServer(target: Endpoint, links: Set<Socket[]>, held: () => Held = () => forwarding): Server {
  return createServer((client) => {
    const server = typeof target === 'number' ? connect(target, '127.0.0.1') : connect(target);
    const link = [client, server];
    links.add(link);
    const drop = () => {
      links.delete(link);
      client.destroy();
      server.destroy();
    };
    client.on('data', (chunk) => {
      // held: dropped here; `cut` ends the connection, so the client never gets a reply to it
      if (!held().toServer) server.write(chunk);
    });
    client.on('end', () => (held().toServer ? drop() : server.end()));
    server.on('data', (chunk) => {
      if (!held().toClient) client.write(chunk);
    });
    server.on('end', () => client.end());
    client.on('error', drop).on('close', drop);
    server.on('error', drop).on('close', drop);
  });
}

const listen = (server: Server, on: Endpoint) =>
  new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    if (typeof on === 'number') server.listen(on, '127.0.0.1', () => resolve());
    else server.listen(on, () => resolve());
  });

/** A relay on a free loopback port to `targetPort` on the loopback; listening unless `closed`; closed at teardown. */
export async function startRelay(
  t: Pick<ExecutionContext, 'teardown'>,
  targetPort: number,
  options: { closed?: boolean } = {},
): Promise<Relay> {
  let held: Held = forwarding;
  const links = new Set<Socket[]>();
  const dropAll = () => {
    for (const link of links) for (const socket of link) socket.destroy();
    links.clear();
  };
  let server: Server | undefined = relayServer(targetPort, links, () => held);
  await listen(server, 0);
  const { port } = server.address() as { port: number };
  const close = () =>
    new Promise<void>((resolve) => {
      dropAll();
      if (server) server.close(() => resolve());
      else resolve();
      server = undefined;
    });
  if (options.closed) await close();
  t.teardown(close);
  return {
    port,
    address: `127.0.0.1:${port}`,
    open: async () => {
      if (server) return;
      server = relayServer(targetPort, links, () => held);
      await listen(server, port);
    },
    close,
    hold: (direction = 'to server') => {
      held = { toServer: true, toClient: direction === 'both ways' };
    },
    cut: () => {
      dropAll();
      held = forwarding;
    },
    release: () => {
      held = forwarding;
    },
  };
}

/** A copy of `kubeconfig` (in `dir`) that reaches the API server at `serverUrl` through `relay`. */
export function kubeconfigThrough(relay: Relay, kubeconfig: string, serverUrl: string, dir: string): string {
  const copy = join(dir, basename(kubeconfig));
  writeFileSync(copy, readFileSync(kubeconfig, 'utf8').replaceAll(serverUrl, `https://${relay.address}`));
  return copy;
}

/** This file, to run as a relay program: `node RELAY_PROGRAM <listen> <target> [<listen> <target>]...`. */
export const RELAY_PROGRAM = new URL(import.meta.url).pathname;

if (import.meta.main) {
  // Each argument a port on the loopback or a unix socket's path.
  const endpoint = (arg: string): Endpoint => (/^\d+$/.test(arg) ? Number(arg) : arg);
  const args = process.argv.slice(2);
  for (let i = 0; i + 1 < args.length; i += 2)
    void listen(relayServer(endpoint(args[i + 1] as string), new Set()), endpoint(args[i] as string));
}
