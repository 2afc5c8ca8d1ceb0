// A TCP relay in front of a test's real datastore (etcd or kube-apiserver) that can hold what its
// clients send. While held, requests reach neither the server nor the client's reply; `cut` then
// drops every connection with what it held, as the network loses the packets of a host that died.
// It stops a client mid-commit at a known point, so a test of a crash need not race it.
import { connect, createServer, type Socket } from 'node:net';

import type { ExecutionContext } from 'ava';

export interface WireHold {
  /** `127.0.0.1:<port>`: where clients connect instead of the server. */
  address: string;
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

interface Relayed {
  client: Socket;
  server: Socket;
}

export async function startWireHold(t: Pick<ExecutionContext, 'teardown'>, target: { host: string; port: number }): Promise<WireHold> {
  let held = false;
  let heldBothWays = false;
  const live = new Set<Relayed>();
  const relay = createServer((client) => {
    const server = connect(target.port, target.host);
    const link = { client, server };
    live.add(link);
    const drop = () => {
      live.delete(link);
      client.destroy();
      server.destroy();
    };
    client.on('data', (chunk) => {
      if (!held) server.write(chunk);
      // held: dropped here; `cut` ends the connection, so the client never gets a reply to it
    });
    client.on('end', () => (held ? drop() : server.end()));
    server.on('data', (chunk) => {
      if (!heldBothWays) client.write(chunk);
    });
    server.on('end', () => client.end());
    client.on('error', drop).on('close', drop);
    server.on('error', drop).on('close', drop);
  });
  await new Promise<void>((resolve) => relay.listen(0, '127.0.0.1', resolve));
  t.teardown(async () => {
    for (const link of live) {
      link.client.destroy();
      link.server.destroy();
    }
    await new Promise((resolve) => relay.close(resolve));
  });
  const { port } = relay.address() as { port: number };
  return {
    address: `127.0.0.1:${port}`,
    hold: (direction = 'to server') => {
      held = true;
      heldBothWays = direction === 'both ways';
    },
    cut: () => {
      for (const link of live) {
        link.client.destroy();
        link.server.destroy();
      }
      live.clear();
      held = false;
      heldBothWays = false;
    },
    release: () => {
      held = false;
      heldBothWays = false;
    },
  };
}
