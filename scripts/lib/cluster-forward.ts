// Runs inside a test cluster's network namespace (cluster.ts starts it with nsenter): relays each
// connection on a Unix socket in the cluster's directory to a TCP port in the namespace, so
// processes outside it (the tests, with the host-side listener cluster.ts runs) reach the API
// server. Unix sockets are reached by path whatever the network namespace.
import { connect, createServer } from 'node:net';
import { rmSync } from 'node:fs';

const [socket, host, port] = process.argv.slice(2);
if (!socket || !host || !port) throw new Error('usage: cluster-forward.ts SOCKET HOST PORT');
rmSync(socket, { force: true });
createServer((client) => {
  const upstream = connect(Number(port), host);
  client.pipe(upstream).pipe(client);
  client.on('error', () => upstream.destroy());
  upstream.on('error', () => client.destroy());
}).listen(socket);
process.on('SIGTERM', () => process.exit(0));
