// Real servers for the HTTP tests: test/net/serve.py (Python's http.server) plain or over TLS,
// certificates from openssl, and tinyproxy; each stopped at teardown.
import { spawn } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { connect } from 'node:net';
import { createInterface } from 'node:readline';

import type { ExecutionContext } from 'ava';

import type { HttpClient } from '../../ts/net/http-client.ts';

import { freePort } from '../helpers/etcd.ts';
import { eventually } from '../helpers/eventually.ts';
import { makeTestCa } from '../../scripts/lib/test-ca.ts';

const SERVE = new URL('./serve.py', import.meta.url).pathname;

type Teardown = Pick<ExecutionContext, 'teardown'>;

export interface Served {
  port: number;
  pid: number;
  url(path?: string): URL;
}

/** serve.py in `mode`, over TLS with `tls` (and requiring a client certificate with `clientCa`). */
export async function serve(
  t: Teardown,
  mode: 'http10' | 'http11' | 'http11-idle',
  tls?: { cert: string; key: string; clientCa?: string },
): Promise<Served> {
  const args = [SERVE, mode, ...(tls ? [tls.cert, tls.key, ...(tls.clientCa ? [tls.clientCa] : [])] : [])];
  const child = spawn('python3', args, { stdio: ['ignore', 'pipe', 'ignore'] });
  t.teardown(() => {
    child.kill('SIGKILL');
  });
  const line = await new Promise<string>((resolve, reject) => {
    createInterface({ input: child.stdout }).once('line', resolve);
    child.once('exit', (code) => reject(new Error(`serve.py ${mode} exited with ${code}`)));
  });
  const port = Number(line);
  const scheme = tls ? 'https' : 'http';
  return { port, pid: child.pid as number, url: (path = '/') => new URL(`${scheme}://127.0.0.1:${port}${path}`) };
}

export interface Certs {
  ca: string;
  serverCert: string;
  serverKey: string;
  clientCert: string;
  clientKey: string;
}

/** A CA, a server certificate for 127.0.0.1 and localhost, and a client certificate, in `dir`. */
export function makeCerts(dir: string): Certs {
  const testCa = makeTestCa(dir, 'netplug http test CA');
  testCa.signSync('server', '/CN=netplug http test server', 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n');
  testCa.signSync('client', '/CN=netplug http test client', 'extendedKeyUsage=clientAuth\n');
  const at = (file: string) => join(dir, file);
  return {
    ca: at('ca.pem'),
    serverCert: at('server.pem'),
    serverKey: at('server.key'),
    clientCert: at('client.pem'),
    clientKey: at('client.key'),
  };
}

export interface Proxy {
  url: URL;
  /** What tinyproxy logged so far (its CONNECT lines name each tunnel's target). */
  log(): string;
}

/** tinyproxy on a free loopback port, tunnelling CONNECT to any port. */
export async function startProxy(t: Teardown, dir: string): Promise<Proxy> {
  const port = await freePort();
  const logFile = join(dir, 'tinyproxy.log');
  const config = join(dir, 'tinyproxy.conf');
  writeFileSync(logFile, '');
  // No ConnectPort line: CONNECT to every port is allowed.
  writeFileSync(
    config,
    `Port ${port}\nListen 127.0.0.1\nTimeout 30\nLogFile "${logFile}"\nLogLevel Connect\nMaxClients 20\nAllow 127.0.0.1\n`,
  );
  const child = spawn('tinyproxy', ['-d', '-c', config], { stdio: 'ignore' });
  t.teardown(() => {
    child.kill('SIGKILL');
  });
  await eventually('tinyproxy to accept connections', () => accepts(port), { intervalMs: 50 });
  return { url: new URL(`http://127.0.0.1:${port}`), log: () => readFileSync(logFile, 'utf8') };
}

function accepts(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

/** GETs through `http` that record each answer's body when it arrives: the order a connection served them. */
export function answerOrder(http: HttpClient): { get(path: string): Promise<number>; answered: string[] } {
  const answered: string[] = [];
  return {
    get: (path) => http.request({ method: 'GET', path }).then((r) => answered.push(r.body.toString().trim())),
    answered,
  };
}
