// The HTTP/2 connection of resident programs (ts/net/http2-client.ts) against a real
// kube-apiserver: many requests at once over it with a client certificate, a DELETE with a body,
// and the failures the Kubernetes client tells apart: no server or no answer in time (unavailable,
// CNI error 11) and a server whose certificate is not trusted (a setting to fix).
import { createSecureServer } from 'node:http2';
import { createServer } from 'node:net';
import { readFileSync } from 'node:fs';

import test from 'ava';

import { Http2Client } from '../../ts/net/http2-client.ts';
import { HttpTlsError, HttpUnavailableError, TlsMaterialError } from '../../ts/net/http-client.ts';
import { tempDir } from '../helpers/cni.ts';
import { startKube } from '../helpers/kube.ts';
import { makeCerts } from './servers.ts';

/** A port nothing listens on (taken, then let go). */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

test('twenty requests at once over one connection, with a client certificate; a DELETE carries its body; untrusted and absent servers fail apart', async (t) => {
  const kube = await startKube(t);
  const admin = kube.server.admin;
  const tls = { ca: readFileSync(kube.server.ca), cert: readFileSync(admin.cert), key: readFileSync(admin.key) };
  const http = new Http2Client({ endpoint: new URL(kube.server.url), tls });
  t.teardown(() => http.close());

  const answers = await Promise.all(
    Array.from({ length: 20 }, (_, i) => http.request({ method: 'GET', path: i % 2 === 0 ? '/version' : '/api/v1/namespaces/default' })),
  );
  t.deepEqual(new Set(answers.map((a) => a.status)), new Set([200]));
  t.is(JSON.parse(answers[1]?.body.toString() ?? '{}').metadata.name, 'default');
  t.is(answers[0]?.headers.get('content-type'), 'application/json');

  const body = (value: unknown) => Buffer.from(JSON.stringify(value));
  const created = await http.request({
    method: 'POST',
    path: '/api/v1/namespaces/default/configmaps',
    headers: { 'Content-Type': 'application/json' },
    body: body({ metadata: { name: 'h2-test' }, data: { a: '1' } }),
  });
  t.is(created.status, 201);
  // A stale precondition in the DELETE's body: refused, so the body reached the server.
  const stale = { apiVersion: 'v1', kind: 'DeleteOptions', preconditions: { resourceVersion: '1' } };
  const path = '/api/v1/namespaces/default/configmaps/h2-test';
  const headers = { 'Content-Type': 'application/json' };
  t.is((await http.request({ method: 'DELETE', path, headers, body: body(stale) })).status, 409);
  t.is((await http.request({ method: 'DELETE', path })).status, 200);

  const certs = makeCerts(tempDir(t, 'h2certs'));
  const untrusting = new Http2Client({ endpoint: new URL(kube.server.url), tls: { ca: readFileSync(certs.ca) } });
  t.teardown(() => untrusting.close());
  await t.throwsAsync(untrusting.request({ method: 'GET', path: '/version' }), { instanceOf: HttpTlsError });

  const absent = new Http2Client({ endpoint: new URL(`https://127.0.0.1:${await closedPort()}`), tls });
  t.teardown(() => absent.close());
  const error = await t.throwsAsync(absent.request({ method: 'GET', path: '/version' }), { instanceOf: HttpUnavailableError });
  t.regex(error?.message ?? '', /ECONNREFUSED/);
});

test('unusable TLS material is refused when the connection is made, naming the part', (t) => {
  const endpoint = new URL('https://127.0.0.1:1');
  const garbage = Buffer.from('-----BEGIN CERTIFICATE-----\nnot a certificate\n-----END CERTIFICATE-----\n');
  const ca = t.throws(() => new Http2Client({ endpoint, tls: { ca: garbage } }), { instanceOf: TlsMaterialError });
  t.is(ca?.part, 'ca');
  const key = t.throws(() => new Http2Client({ endpoint, tls: { key: Buffer.from('no key') } }), { instanceOf: TlsMaterialError });
  t.is(key?.part, 'key');
});

test('a request the server never answers is given up at its deadline, and the connection serves the next', async (t) => {
  const certs = makeCerts(tempDir(t, 'h2silent'));
  const server = createSecureServer({ cert: readFileSync(certs.serverCert), key: readFileSync(certs.serverKey) }, (request, response) => {
    if (request.url === '/silent') return; // never answered
    response.end('answered');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())));
  const { port } = server.address() as { port: number };
  const http = new Http2Client({
    endpoint: new URL(`https://127.0.0.1:${port}`),
    tls: { ca: readFileSync(certs.ca) },
    requestTimeoutMs: 300,
  });
  t.teardown(() => http.close());
  const late = await t.throwsAsync(http.request({ method: 'GET', path: '/silent' }), { instanceOf: HttpUnavailableError });
  t.regex(late?.message ?? '', /no answer within 0.3 s/);
  const next = await http.request({ method: 'GET', path: '/other' });
  t.is(next.body.toString(), 'answered');
});
