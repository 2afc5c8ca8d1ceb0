// The HTTP client against real servers: Python's http.server (HTTP/1.0 and 1.1, plain and TLS),
// tinyproxy, a real kube-apiserver; and proxyFor's reading of the environment.
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';

import test from 'ava';

import { openKubeClient } from '../../ts/k8s/client.ts';
import { HttpClient, HttpTlsError, HttpUnavailableError, TlsMaterialError, join, urgently } from '../../ts/net/http-client.ts';
import { proxyFor } from '../../ts/net/proxy.ts';
import { tempDir } from '../helpers/cni.ts';
import { startKube } from '../helpers/kube.ts';
import { answerOrder, makeCerts, serve, startProxy } from './servers.ts';

const HTTP_CLIENT = new URL('../../ts/net/http-client.ts', import.meta.url).pathname;

test('an HTTP/1.0 answer without Content-Length ends when the server closes', async (t) => {
  const server = await serve(t, 'http10');
  const http = new HttpClient({ endpoints: [server.url()] });
  const response = await http.request({ method: 'POST', path: '/ready', body: Buffer.from('{}') });
  t.is(response.status, 200);
  t.is(response.body.toString(), 'ready /ready {}');
  t.is(response.origin, `http://127.0.0.1:${server.port}`);
});

test('204 without Content-Length, chunked and Content-Length answers share one kept-alive connection', async (t) => {
  const server = await serve(t, 'http11');
  const http = new HttpClient({ endpoints: [server.url()] });
  const empty = await http.request({ method: 'GET', path: '/204' });
  t.is(empty.status, 204);
  t.is(empty.body.length, 0);
  const chunked = await http.request({ method: 'GET', path: '/chunked' });
  t.is(chunked.body.toString(), '{"a":1}');
  const plain = await http.request({ method: 'PUT', path: '/x?y=1', body: Buffer.from('z') });
  t.is(plain.body.toString(), 'PUT /x?y=1 z');
  t.deepEqual(
    [empty, chunked, plain].map((r) => r.headers.get('x-connection')),
    ['1', '1', '1'],
  );
});

test('requests made urgently go ahead of those waiting, after the one in flight, in their own order', async (t) => {
  const server = await serve(t, 'http11');
  const http = new HttpClient({ endpoints: [server.url()] });
  const { get, answered } = answerOrder(http);
  const waiting = ['/a', '/b', '/c'].map(get);
  const urgent = urgently(() => Promise.all([get('/u1'), get('/u2')]));
  await Promise.all([...waiting, urgent]);
  t.deepEqual(answered, ['GET /a', 'GET /u1', 'GET /u2', 'GET /b', 'GET /c']);
});

test('Connection: close is honoured and the next request opens a new connection', async (t) => {
  const server = await serve(t, 'http11');
  const http = new HttpClient({ endpoints: [server.url()] });
  const first = await http.request({ method: 'GET', path: '/close' });
  t.is(first.body.toString(), 'closing');
  const second = await http.request({ method: 'GET', path: '/close' });
  t.not(second.headers.get('x-connection'), first.headers.get('x-connection'));
});

test('a connection the server closed while idle is replaced without an error', async (t) => {
  const server = await serve(t, 'http11-idle');
  const http = new HttpClient({ endpoints: [server.url()] });
  const first = await http.request({ method: 'GET', path: '/a' });
  await new Promise((resolve) => setTimeout(resolve, 3_000)); // the server closes idle connections after 0.5 s
  const second = await http.request({ method: 'GET', path: '/b' });
  t.is(second.body.toString(), 'GET /b ');
  t.not(second.headers.get('x-connection'), first.headers.get('x-connection'));
});

test('a server that never answers runs into the deadline', async (t) => {
  const server = await serve(t, 'http11');
  const http = new HttpClient({ endpoints: [server.url()], requestTimeoutMs: 500 });
  const err = await t.throwsAsync(http.request({ method: 'GET', path: '/hang' }), { instanceOf: HttpUnavailableError });
  t.regex(err.message, /timeout/i);
});

test('request paths follow the endpoint path prefix', async (t) => {
  t.is(join(new URL('https://host/k8s/clusters/c-1'), '/api/v1/pods'), 'https://host/k8s/clusters/c-1/api/v1/pods');
  t.is(join(new URL('https://host:6443/'), '/version'), 'https://host:6443/version');
  const server = await serve(t, 'http11');
  const http = new HttpClient({ endpoints: [server.url('/prefix/')] });
  t.is((await http.request({ method: 'GET', path: '/api?x=1' })).body.toString(), 'GET /prefix/api?x=1 ');
});

test('https with a given CA, and mutual TLS', async (t) => {
  const certs = makeCerts(tempDir(t, 'certs'));
  const server = await serve(t, 'http11', { cert: certs.serverCert, key: certs.serverKey });
  const ca = readFileSync(certs.ca);
  const http = new HttpClient({ endpoints: [server.url()], tls: { ca } });
  t.is((await http.request({ method: 'GET', path: '/ok' })).status, 200);
  // Not the server's CA: a TLS error, reported as one.
  const stranger = makeCerts(tempDir(t, 'stranger'));
  const refused = new HttpClient({ endpoints: [server.url()], tls: { ca: readFileSync(stranger.ca) } });
  await t.throwsAsync(refused.request({ method: 'GET', path: '/ok' }), { instanceOf: HttpTlsError });

  const mutual = await serve(t, 'http11', { cert: certs.serverCert, key: certs.serverKey, clientCa: certs.ca });
  const withCert = new HttpClient({
    endpoints: [mutual.url()],
    tls: { ca, cert: readFileSync(certs.clientCert), key: readFileSync(certs.clientKey) },
  });
  t.is((await withCert.request({ method: 'GET', path: '/ok' })).status, 200);
  const withoutCert = new HttpClient({ endpoints: [mutual.url()], tls: { ca } });
  const err = await t.throwsAsync(withoutCert.request({ method: 'GET', path: '/ok' }));
  t.true(err instanceof HttpTlsError || err instanceof HttpUnavailableError, err.message);
});

test('unusable TLS material names its part when the client is made', (t) => {
  const endpoints = [new URL('https://127.0.0.1:1')];
  t.is(t.throws(() => new HttpClient({ endpoints, tls: { ca: Buffer.from('not pem') } }), { instanceOf: TlsMaterialError }).part, 'ca');
  t.is(t.throws(() => new HttpClient({ endpoints, tls: { cert: Buffer.from('x') } }), { instanceOf: TlsMaterialError }).part, 'key');
});

test('https without a CA trusts the platform store (here SSL_CERT_FILE, read as OpenSSL does)', async (t) => {
  const certs = makeCerts(tempDir(t, 'certs'));
  const server = await serve(t, 'http11', { cert: certs.serverCert, key: certs.serverKey });
  // A process of its own: the store is the process environment's.
  const script = `
    import { HttpClient } from ${JSON.stringify(HTTP_CLIENT)};
    const http = new HttpClient({ endpoints: [new URL(${JSON.stringify(server.url().href)})] });
    try { console.log((await http.request({ method: 'GET', path: '/ok' })).status); }
    catch (err) { console.log(err.name); }`;
  const run = (env: Record<string, string>) =>
    execFileSync(process.execPath, ['--input-type=module', '-e', script], { env: { ...process.env, ...env }, encoding: 'utf8' }).trim();
  t.is(run({ SSL_CERT_FILE: certs.ca }), '200');
  t.is(run({ SSL_CERT_FILE: '/etc/ssl/certs/ca-certificates.crt' }), 'HttpTlsError');
});

test('proxyFor reads HTTPS_PROXY, HTTP_PROXY and NO_PROXY as curl and Go do', (t) => {
  const api = new URL('https://api.cluster.example:6443');
  const env = (extra: Record<string, string>) => ({ HTTPS_PROXY: 'http://proxy:3128', ...extra });
  t.is(proxyFor(api, env({}))?.href, 'http://proxy:3128/');
  t.is(proxyFor(api, { https_proxy: 'proxy:8080' })?.href, 'http://proxy:8080/');
  t.is(proxyFor(new URL('http://api:8080'), env({})), undefined, 'HTTPS_PROXY is for https only');
  t.is(proxyFor(new URL('http://api:8080'), { HTTP_PROXY: 'http://p:1' })?.href, 'http://p:1/');
  t.is(proxyFor(api, env({ NO_PROXY: '*' })), undefined);
  t.is(proxyFor(api, env({ NO_PROXY: 'cluster.example' })), undefined, 'a domain covers its subdomains');
  t.is(proxyFor(api, env({ no_proxy: 'foo, .example' })), undefined, 'with a leading dot too');
  t.truthy(proxyFor(api, env({ NO_PROXY: 'ster.example' })), 'a suffix must start at a label');
  t.is(proxyFor(api, env({ NO_PROXY: 'api.cluster.example:6443' })), undefined);
  t.truthy(proxyFor(api, env({ NO_PROXY: 'api.cluster.example:443' })), 'another port');
  const ip = new URL('https://10.96.0.1');
  t.is(proxyFor(ip, env({ NO_PROXY: '10.0.0.0/8' })), undefined);
  t.is(proxyFor(ip, env({ NO_PROXY: '10.96.0.1' })), undefined);
  t.truthy(proxyFor(ip, env({ NO_PROXY: '10.97.0.0/16,example' })));
  t.is(proxyFor(new URL('https://[fd00::1]:6443'), env({ NO_PROXY: 'fd00::/8' })), undefined);
  t.is(proxyFor(new URL('https://[fd00::1]:6443'), env({ NO_PROXY: '[fd00::1]:6443' })), undefined);
  t.throws(() => proxyFor(api, { HTTPS_PROXY: 'socks5://proxy:1080' }), { message: /must be an http/ });
});

test.serial('requests to the API server go through HTTPS_PROXY, and NO_PROXY bypasses it', async (t) => {
  const kube = await startKube(t);
  const proxy = await startProxy(t, tempDir(t, 'proxy'));
  const saved = { HTTPS_PROXY: process.env['HTTPS_PROXY'], NO_PROXY: process.env['NO_PROXY'] };
  t.teardown(() => {
    for (const [name, value] of Object.entries(saved)) {
      if (value === undefined) delete process.env[name];
      else process.env[name] = value;
    }
  });
  const server = new URL(kube.server.url);
  process.env['HTTPS_PROXY'] = proxy.url.href;
  delete process.env['NO_PROXY'];
  const through = await openKubeClient({ kubeconfig: kube.server.plugin.kubeconfig });
  t.truthy(await through.get('/api/v1/namespaces/default', 'get namespaces'));
  t.true(proxy.log().includes(`CONNECT ${server.host}`), proxy.log());

  const before = proxy.log().length;
  process.env['NO_PROXY'] = server.hostname;
  const direct = await openKubeClient({ kubeconfig: kube.server.plugin.kubeconfig });
  t.truthy(await direct.get('/api/v1/namespaces/default', 'get namespaces'));
  t.false(proxy.log().slice(before).includes('CONNECT'), proxy.log().slice(before));
});
