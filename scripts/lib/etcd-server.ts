// A real etcd (Debian's etcd-server) on loopback, for the tests, the benchmarks and the demo:
// plain or with mutual TLS, on free ports, its data in a directory the caller owns. Certificates
// come from openssl: a client CA and a server CA; clients trust a bundle holding both roots, and
// the server's certificate is signed by the second one, so a client that trusted only the first
// root in a bundle would fail.
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { request } from 'node:https';
import { request as httpRequest } from 'node:http';
import { createServer } from 'node:net';
import { join } from 'node:path';

import { ExitedWhileStarting, onFreshPorts } from './fresh-ports.ts';

export interface EtcdCerts {
  /** Trusted by clients: both CAs' roots in one file. */
  caBundle: string;
  clientCert: string;
  clientKey: string;
  /** Signed by a CA the server does not trust. */
  strangerCert: string;
  strangerKey: string;
}

export interface EtcdServer {
  /** Comma-separated client URLs, as etcd_endpoints takes them. */
  endpoints: string;
  port: number;
  certs?: EtcdCerts;
  /** Netconf fields that reach this etcd. */
  netconf: Record<string, string>;
  stop(): Promise<void>;
  start(): Promise<void>;
}

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => (typeof address === 'object' && address ? resolve(address.port) : reject(new Error('no port'))));
    });
  });
}

export interface EtcdOptions {
  /** Mutual TLS: clients need a certificate; see makeCerts. */
  tls?: boolean;
  /** A DNS name the server certificate is valid for besides 127.0.0.1 and localhost. */
  dnsName?: string;
}

/** Starts etcd with its data and certificates in `dir` (the caller removes it after stop()). */
export async function launchEtcd(dir: string, options: EtcdOptions = {}): Promise<EtcdServer> {
  const certs = options.tls ? makeCerts(dir, options.dnsName) : undefined;
  // etcd exits at once when its ports were taken (or its data directory is unusable).
  return onFreshPorts(async () => {
    const server = etcdServer(dir, certs, await freePort(), await freePort());
    try {
      await server.start();
      return server;
    } catch (err) {
      await server.stop();
      rmSync(join(dir, 'data'), { recursive: true, force: true });
      throw err;
    }
  });
}

/** An etcd on these ports, not started yet; start() may be called again after stop() (a restart). */
function etcdServer(dir: string, certs: EtcdCerts | undefined, port: number, peerPort: number): EtcdServer {
  const scheme = certs ? 'https' : 'http';
  const url = `${scheme}://127.0.0.1:${port}`;
  const args = [
    '--name',
    'netplug-test',
    '--data-dir',
    join(dir, 'data'),
    '--listen-client-urls',
    url,
    '--advertise-client-urls',
    url,
    '--listen-peer-urls',
    `http://127.0.0.1:${peerPort}`,
    '--initial-advertise-peer-urls',
    `http://127.0.0.1:${peerPort}`,
    '--initial-cluster',
    `netplug-test=http://127.0.0.1:${peerPort}`,
    '--logger',
    'zap',
    '--log-level',
    'error',
    ...(certs
      ? [
          '--cert-file',
          join(dir, 'server.pem'),
          '--key-file',
          join(dir, 'server.key'),
          '--client-cert-auth',
          '--trusted-ca-file',
          join(dir, 'ca-bundle.pem'),
        ]
      : []),
  ];
  let child: ChildProcess | undefined;
  const server: EtcdServer = {
    endpoints: url,
    port,
    ...(certs ? { certs } : {}),
    netconf: {
      etcd_endpoints: url,
      ...(certs ? { etcd_ca_cert_file: certs.caBundle, etcd_cert_file: certs.clientCert, etcd_key_file: certs.clientKey } : {}),
    },
    async start() {
      const started = spawn('etcd', args, { stdio: 'ignore' });
      child = started;
      await waitHealthy(port, certs, () => started.exitCode !== null || started.signalCode !== null);
    },
    async stop() {
      if (!child || child.exitCode !== null || child.signalCode !== null) return;
      const exited = new Promise((resolve) => child?.once('exit', resolve));
      child.kill('SIGKILL');
      await exited;
    },
  };
  return server;
}

/** Until etcd answers its health check; a loaded machine can take seconds to start it. */
async function waitHealthy(port: number, certs: EtcdCerts | undefined, exited: () => boolean): Promise<void> {
  const deadline = Date.now() + 60_000;
  while (Date.now() < deadline) {
    if (await healthy(port, certs)) return;
    if (exited()) throw new ExitedWhileStarting(`etcd on port ${port} exited before it became healthy`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`etcd on port ${port} did not become healthy within 60 s`);
}

function healthy(port: number, certs: EtcdCerts | undefined): Promise<boolean> {
  return new Promise((resolve) => {
    const done = (response: { statusCode?: number | undefined; resume(): void }) => {
      response.resume();
      resolve(response.statusCode === 200);
    };
    const req = certs
      ? request(
          {
            host: '127.0.0.1',
            port,
            path: '/health',
            ca: readFileSync(certs.caBundle),
            cert: readFileSync(certs.clientCert),
            key: readFileSync(certs.clientKey),
          },
          done,
        )
      : httpRequest({ host: '127.0.0.1', port, path: '/health' }, done);
    req.on('error', () => resolve(false));
    req.end();
  });
}

/** Two CAs (client, server) and certificates from them, one more from a CA nobody trusts. */
function makeCerts(dir: string, dnsName = 'etcd.netplug.test'): EtcdCerts {
  const ssl = (...args: string[]) => execFileSync('openssl', args, { cwd: dir, stdio: 'ignore' });
  const ca = (name: string) =>
    ssl(
      'req',
      '-x509',
      '-newkey',
      'ec',
      '-pkeyopt',
      'ec_paramgen_curve:P-256',
      '-nodes',
      '-keyout',
      `${name}.key`,
      '-out',
      `${name}.pem`,
      '-days',
      '2',
      '-subj',
      `/CN=netplug test ${name}`,
    );
  const leaf = (name: string, signer: string, extensions: string) => {
    writeFileSync(join(dir, `${name}.ext`), extensions);
    ssl(
      'req',
      '-newkey',
      'ec',
      '-pkeyopt',
      'ec_paramgen_curve:P-256',
      '-nodes',
      '-keyout',
      `${name}.key`,
      '-out',
      `${name}.csr`,
      '-subj',
      `/CN=netplug test ${name}`,
    );
    ssl(
      'x509',
      '-req',
      '-in',
      `${name}.csr`,
      '-CA',
      `${signer}.pem`,
      '-CAkey',
      `${signer}.key`,
      '-CAcreateserial',
      '-out',
      `${name}.pem`,
      '-days',
      '2',
      '-extfile',
      `${name}.ext`,
    );
  };
  ca('ca1');
  ca('ca2');
  ca('ca3');
  // etcd 3.4's built-in JSON gateway dials etcd's own gRPC port with the server certificate as its
  // client certificate, so with --client-cert-auth that certificate must serve both ways.
  leaf('server', 'ca2', `subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:${dnsName}\nextendedKeyUsage=serverAuth,clientAuth\n`);
  leaf('client', 'ca1', 'extendedKeyUsage=clientAuth\n');
  leaf('stranger', 'ca3', 'extendedKeyUsage=clientAuth\n');
  execFileSync('sh', ['-c', 'cat ca1.pem ca2.pem > ca-bundle.pem'], { cwd: dir });
  return {
    caBundle: join(dir, 'ca-bundle.pem'),
    clientCert: join(dir, 'client.pem'),
    clientKey: join(dir, 'client.key'),
    strangerCert: join(dir, 'stranger.pem'),
    strangerKey: join(dir, 'stranger.key'),
  };
}
