// Kubeconfig credentials as client-go reads them, against a real kube-apiserver: the plugin in
// Kubernetes mode reads the pod with a token, a tokenFile, a client certificate and key (data and
// files), and exec plugins (scripts written here) returning a token from a real TokenRequest or a
// client certificate; a refused or expired exec credential runs the plugin again; a missing
// plugin names its installHint; a server URL with a path prefix goes through a reverse proxy that
// serves the API only under it. No token or key text reaches stderr or the log at DEBUG.
import { chmodSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer, request } from 'node:https';
import { join } from 'node:path';

import test, { type ExecutionContext } from 'ava';
import { dump } from 'js-yaml';

import { openKubeClient } from '../../ts/k8s/client.ts';
import { runtimeInput, tempDir, type Invocation } from '../helpers/cni.ts';
import { startEtcd, type EtcdServer } from '../helpers/etcd.ts';
import { ctlOk, etcdValue, invokeAsync, ipamNetconf } from '../helpers/ipam.ts';
import { containerId, createNetns } from '../helpers/kernel.ts';
import { createPod, podArgs, serviceAccountToken, startKube, type Kube } from '../helpers/kube.ts';
import { sharedTeardowns } from '../helpers/shared.ts';

let kube: Kube;
let etcd: EtcdServer;
/** A real ServiceAccount token with the plugin's permissions. */
let token: string;
const shared = sharedTeardowns(test);
const EXEC_V1 = 'client.authentication.k8s.io/v1';

test.before(async (t) => {
  kube = await startKube(shared);
  etcd = await startEtcd(shared);
  ctlOk(t, etcd, 'pool', 'create', 'default', '--cidr', '10.112.0.0/16');
  token = await serviceAccountToken(kube, 'netplug-cni');
});

const pem = (path: string) => readFileSync(path, 'utf8');
/** The base64 body of a PEM key: text that must never be logged. */
const keyText = (path: string) => pem(path).split('\n')[1] ?? '';

/** A YAML kubeconfig in `dir` for `user`; the cluster trusts the test CA (embedded) unless `cluster` says otherwise. */
function writeKubeconfig(dir: string, user: Record<string, unknown>, cluster: Record<string, unknown> = {}): string {
  const path = join(dir, 'kubeconfig');
  const config = {
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [
      {
        name: 'test',
        // Keys given as undefined are left out.
        cluster: Object.fromEntries(
          Object.entries({
            server: kube.server.url,
            'certificate-authority-data': Buffer.from(pem(kube.server.ca)).toString('base64'),
            ...cluster,
          }).filter(([, value]) => value !== undefined),
        ),
      },
    ],
    users: [{ name: 'netplug', user }],
    contexts: [{ name: 'test', context: { cluster: 'test', user: 'netplug' } }],
    'current-context': 'test',
  };
  writeFileSync(path, dump(config), { mode: 0o600 });
  return path;
}

/**
 * An exec plugin: a script that counts its runs, records its args, KUBERNETES_EXEC_INFO and
 * CREDS_TEST_VALUE, and prints `outputs[n]` on its n-th run (the last one after that).
 */
function execPlugin(dir: string, outputs: unknown[]) {
  for (const [n, output] of outputs.entries()) writeFileSync(join(dir, `out-${n + 1}.json`), JSON.stringify(output));
  const script = join(dir, 'netplug-test-credential');
  writeFileSync(
    script,
    [
      '#!/bin/sh',
      'dir=$(dirname "$0")',
      'echo run >> "$dir/runs"',
      'n=$(($(wc -l < "$dir/runs")))',
      `[ -f "$dir/out-$n.json" ] || n=${outputs.length}`,
      'printf "%s" "$KUBERNETES_EXEC_INFO" > "$dir/exec-info.json"',
      'printf "%s\\n" "$@" > "$dir/args"',
      'printf "%s" "$CREDS_TEST_VALUE" > "$dir/env"',
      'cat "$dir/out-$n.json"',
      '',
    ].join('\n'),
  );
  chmodSync(script, 0o755);
  const read = (name: string) => {
    try {
      return readFileSync(join(dir, name), 'utf8');
    } catch {
      return '';
    }
  };
  return { script, runs: () => read('runs').split('\n').filter(Boolean).length, read };
}

const credential = (status: Record<string, unknown>, apiVersion = EXEC_V1) => ({ apiVersion, kind: 'ExecCredential', status });

/**
 * ADD of a pod with labels in Kubernetes mode (policy.type k8s reads the pod), at DEBUG with a log
 * file; the pod's endpoint is checked for its labels, then DEL. Returns the ADD and all that was logged.
 */
async function addReadingPod(t: ExecutionContext, kubeconfig: string, options: { path?: string } = {}) {
  const pod = await createPod(kube, { labels: { app: 'credentials' } });
  const id = containerId();
  const netns = createNetns(t, 'cred');
  const logFile = join(tempDir(t, 'credlog'), 'cni.log');
  const netconf = ipamNetconf(etcd, {
    node: 'kube-node',
    extra: { kubernetes: { kubeconfig }, policy: { type: 'k8s' }, log_level: 'debug', log_file_path: logFile },
  });
  const call: Invocation = { command: 'ADD', containerId: id, netns: netns.path, netconf, args: podArgs(pod, id) };
  if (options.path) call.env = { ...runtimeInput(call).env, PATH: options.path };
  const add = await invokeAsync(call);
  const del = () => invokeAsync({ ...call, command: 'DEL' });
  t.teardown(async () => void (await del()));
  const endpointKey = `/netplug/resources/v3/projectnet.org/workloadendpoints/${pod.namespace}/kube--node-k8s-${pod.name.replaceAll('-', '--')}-eth0`;
  const labels = add.status === 0 ? (await etcdValue(t, etcd, endpointKey))?.metadata?.labels : undefined;
  let log = add.stderr;
  try {
    log += readFileSync(logFile, 'utf8');
  } catch {
    // No log file: nothing was logged there.
  }
  return { add, labels, log };
}

/** The ADD read the pod, and no secret was logged. */
function readPod(t: ExecutionContext, outcome: Awaited<ReturnType<typeof addReadingPod>>, secrets: string[]) {
  t.is(outcome.add.status, 0, outcome.add.stdout);
  t.is(outcome.labels?.app, 'credentials', "the pod's labels, read from the API, are in its endpoint");
  t.regex(outcome.log, /\[DEBUG\]/, 'the log is at DEBUG');
  for (const secret of secrets) t.false(outcome.log.includes(secret), 'no credential in stderr or the log file');
}

test('a token', async (t) => {
  const kubeconfig = writeKubeconfig(tempDir(t, 'cred'), { token });
  readPod(t, await addReadingPod(t, kubeconfig), [token]);
});

test('a tokenFile, relative to the kubeconfig', async (t) => {
  const dir = tempDir(t, 'cred');
  writeFileSync(join(dir, 'token'), `${token}\n`);
  const kubeconfig = writeKubeconfig(dir, { tokenFile: 'token' });
  readPod(t, await addReadingPod(t, kubeconfig), [token]);
});

test('a client certificate and key as data', async (t) => {
  const { cert, key } = kube.server.plugin;
  const kubeconfig = writeKubeconfig(tempDir(t, 'cred'), {
    'client-certificate-data': Buffer.from(pem(cert)).toString('base64'),
    'client-key-data': Buffer.from(pem(key)).toString('base64'),
  });
  readPod(t, await addReadingPod(t, kubeconfig), [keyText(key), Buffer.from(pem(key)).toString('base64').slice(0, 40)]);
});

test('a client certificate and key as files, relative to the kubeconfig; the CA as a file', async (t) => {
  const dir = tempDir(t, 'cred');
  const { cert, key } = kube.server.plugin;
  writeFileSync(join(dir, 'client.pem'), pem(cert));
  writeFileSync(join(dir, 'client.key'), pem(key));
  writeFileSync(join(dir, 'ca.pem'), pem(kube.server.ca));
  const kubeconfig = writeKubeconfig(
    dir,
    { 'client-certificate': 'client.pem', 'client-key': 'client.key' },
    { 'certificate-authority-data': undefined, 'certificate-authority': 'ca.pem' },
  );
  readPod(t, await addReadingPod(t, kubeconfig), [keyText(key)]);
});

test('an exec plugin on PATH returning a token: args, env and cluster info as client-go passes them', async (t) => {
  const dir = tempDir(t, 'cred');
  const plugin = execPlugin(dir, [credential({ token })]);
  const kubeconfig = writeKubeconfig(dir, {
    exec: {
      apiVersion: EXEC_V1,
      command: 'netplug-test-credential',
      args: ['get-token', '--cluster', 'c 1'],
      env: [{ name: 'CREDS_TEST_VALUE', value: 'from-kubeconfig' }],
      interactiveMode: 'Never',
      provideClusterInfo: true,
    },
  });
  readPod(t, await addReadingPod(t, kubeconfig, { path: `/usr/sbin:/usr/bin:/sbin:/bin:${dir}` }), [token]);
  t.is(plugin.runs(), 1, 'run once: the credential serves every request');
  t.is(plugin.read('args'), 'get-token\n--cluster\nc 1\n');
  t.is(plugin.read('env'), 'from-kubeconfig');
  const info = JSON.parse(plugin.read('exec-info.json'));
  t.like(info, { apiVersion: EXEC_V1, kind: 'ExecCredential', spec: { interactive: false, cluster: { server: kube.server.url } } });
  t.is(Buffer.from(info.spec.cluster['certificate-authority-data'], 'base64').toString(), pem(kube.server.ca));
});

test('an exec plugin (v1beta1, by path) returning a client certificate and key', async (t) => {
  const dir = tempDir(t, 'cred');
  const { cert, key } = kube.server.plugin;
  const plugin = execPlugin(dir, [
    credential({ clientCertificateData: pem(cert), clientKeyData: pem(key) }, 'client.authentication.k8s.io/v1beta1'),
  ]);
  const kubeconfig = writeKubeconfig(dir, { exec: { apiVersion: 'client.authentication.k8s.io/v1beta1', command: plugin.script } });
  readPod(t, await addReadingPod(t, kubeconfig), [keyText(key)]);
  t.is(plugin.runs(), 1);
  t.is(JSON.parse(plugin.read('exec-info.json')).spec.cluster, undefined, 'no cluster info unless provideClusterInfo');
});

test('a credential the API server refuses (401) runs the exec plugin again, and the request is retried once', async (t) => {
  const dir = tempDir(t, 'cred');
  const plugin = execPlugin(dir, [credential({ token: 'revoked-token-text' }), credential({ token })]);
  const kubeconfig = writeKubeconfig(dir, {
    exec: { apiVersion: EXEC_V1, command: './netplug-test-credential', interactiveMode: 'IfAvailable' },
  });
  readPod(t, await addReadingPod(t, kubeconfig), [token, 'revoked-token-text']);
  t.is(plugin.runs(), 2);
});

test('an exec credential is reused until it expires, then the plugin runs again', async (t) => {
  const dir = tempDir(t, 'cred');
  const past = new Date(Date.now() - 60_000).toISOString();
  const future = new Date(Date.now() + 3_600_000).toISOString();
  const plugin = execPlugin(dir, [credential({ token, expirationTimestamp: past }), credential({ token, expirationTimestamp: future })]);
  const client = await openKubeClient({
    kubeconfig: writeKubeconfig(dir, { exec: { apiVersion: EXEC_V1, command: plugin.script, interactiveMode: 'Never' } }),
  });
  t.teardown(() => client.close());
  const needs = 'get on namespaces';
  t.truthy(await client.get('/api/v1/namespaces/default', needs));
  t.is(plugin.runs(), 1);
  t.truthy(await client.get('/api/v1/namespaces/default', needs));
  t.is(plugin.runs(), 2, 'the first credential had expired');
  t.truthy(await client.get('/api/v1/namespaces/default', needs));
  t.truthy(await client.get('/api/v1/namespaces/kube-system', needs));
  t.is(plugin.runs(), 2, 'the second one is still valid');
});

test('a tokenFile is read again when it changes, as a long-running client needs', async (t) => {
  const dir = tempDir(t, 'cred');
  const file = join(dir, 'token');
  writeFileSync(file, token);
  const client = await openKubeClient({ kubeconfig: writeKubeconfig(dir, { tokenFile: file }) });
  t.teardown(() => client.close());
  const needs = 'get on namespaces';
  t.truthy(await client.get('/api/v1/namespaces/default', needs));
  writeFileSync(file, 'not-a-valid-token');
  const refused = await t.throwsAsync(client.get('/api/v1/namespaces/default', needs));
  t.regex(refused?.message ?? '', /does not accept netplug's credentials \(user "netplug"\)/);
  t.false(refused?.message.includes('not-a-valid-token'));
  writeFileSync(file, token);
  t.truthy(await client.get('/api/v1/namespaces/default', needs));
});

test('an exec plugin that is not installed is error 7 with its installHint', async (t) => {
  const dir = tempDir(t, 'cred');
  const kubeconfig = writeKubeconfig(dir, {
    exec: {
      apiVersion: EXEC_V1,
      command: 'netplug-no-such-credential-plugin',
      interactiveMode: 'Never',
      installHint: 'Install it with:\n  apt-get install netplug-credential-plugin',
    },
  });
  const { add } = await addReadingPod(t, kubeconfig);
  t.is(add.json?.code, 7, add.stdout);
  t.is(
    add.json.msg,
    `netconf field "kubernetes.kubeconfig": ${kubeconfig}: user "netplug": exec plugin "netplug-no-such-credential-plugin" was not found on PATH (/usr/sbin:/usr/bin:/sbin:/bin): Install it with: apt-get install netplug-credential-plugin`,
  );
});

test('a server URL with a path prefix keeps it: every request goes under it', async (t) => {
  const prefix = '/k8s/clusters/c-1';
  const proxy = await prefixProxy(t, prefix);
  const kubeconfig = writeKubeconfig(tempDir(t, 'cred'), { token }, { server: proxy.url });
  readPod(t, await addReadingPod(t, kubeconfig), [token]);
  t.true(proxy.forwarded.length >= 2, 'the pod and its namespace were read through the proxy');
  t.true(
    // The warm-up's GET /version, then the reads.
    proxy.forwarded.every((path) => path === '/version' || path.startsWith('/api/v1/namespaces/')),
    proxy.forwarded.join(', '),
  );
  t.deepEqual(proxy.refused, []);
});

test('without a CA the system roots are trusted, which do not know the test cluster CA', async (t) => {
  const kubeconfig = writeKubeconfig(tempDir(t, 'cred'), { token }, { 'certificate-authority-data': undefined });
  const { add, log } = await addReadingPod(t, kubeconfig);
  t.not(add.status, 0);
  t.regex(add.json?.msg ?? '', /certificate|TLS/i);
  t.false(log.includes(token));
});

/**
 * A reverse proxy serving the API only under `prefix` (as Rancher does): it strips the prefix and
 * forwards over TLS to the API server; anything else is a 404 Status.
 */
async function prefixProxy(t: ExecutionContext, prefix: string) {
  const upstream = new URL(kube.server.url);
  const ca = readFileSync(kube.server.ca);
  const forwarded: string[] = [];
  const refused: string[] = [];
  const server = createServer({ cert: readFileSync(kube.server.serving.cert), key: readFileSync(kube.server.serving.key) }, (req, res) => {
    const url = req.url ?? '/';
    if (!url.startsWith(`${prefix}/`)) {
      refused.push(url);
      res.writeHead(404, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ kind: 'Status', status: 'Failure', message: `nothing at ${url}`, code: 404 }));
      return;
    }
    const path = url.slice(prefix.length);
    forwarded.push(path);
    const onward = request(
      { host: upstream.hostname, port: upstream.port, method: req.method, path, headers: { ...req.headers, host: upstream.host }, ca },
      (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
      },
    );
    onward.on('error', () => res.destroy());
    req.pipe(onward);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(
    () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  );
  const { port } = server.address() as { port: number };
  return { url: `https://127.0.0.1:${port}${prefix}`, forwarded, refused };
}
