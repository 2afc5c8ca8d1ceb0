// A real kube-apiserver on loopback for the tests and benchmarks: its own etcd, serving
// certificates and a service-account key made with openssl, RBAC on, and two identities: an
// administrator (system:masters) and netplug's CNI plugin, with exactly the permissions the
// specification lists (bound by the tests, see grantPluginPermissions). The binary comes from
// scripts/kube-apiserver.sh, built from the Go module proxy.
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { request } from 'node:https';
import { join } from 'node:path';

import { freePort, launchEtcd, type EtcdServer } from './etcd-server.ts';
import { ExitedWhileStarting, onFreshPorts } from './fresh-ports.ts';
import { kubeconfigText, makeTestCa, type TestCa } from './test-ca.ts';

const ROOT = new URL('../../', import.meta.url).pathname;

export interface Identity {
  /** Kubernetes user name (the certificate's CN). */
  user: string;
  kubeconfig: string;
  cert: string;
  key: string;
}

export interface KubeServer {
  /** https://127.0.0.1:<port> */
  url: string;
  ca: string;
  /** The server's own certificate and key (for 127.0.0.1 and localhost), e.g. for a test's reverse proxy. */
  serving: { cert: string; key: string };
  admin: Identity;
  /** netplug's CNI plugin: what a node's plugin runs as. */
  plugin: Identity;
  /** Makes another identity (a certificate and a kubeconfig) with the given user name. */
  identity(user: string): Identity;
  etcd: EtcdServer;
  stop(): Promise<void>;
}

export interface KubeServerOptions {
  /**
   * The API server's GOGC (Go's default 100 unless given). The tests give 400: most of their API
   * servers live for a few tests, and at the default a fifth of the CPU of starting one (building
   * its OpenAPI documents) went to collecting garbage.
   */
  goGc?: number;
}

export async function launchKubeApiserver(dir: string, options: KubeServerOptions = {}): Promise<KubeServer> {
  const binary = execFileSync('sh', [join(ROOT, 'scripts/kube-apiserver.sh')], {
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'inherit'],
  }).trim();
  const etcd = await launchEtcd(join(dir, 'etcd'));
  const testCa = makeTestCa(dir, 'netplug test cluster CA');
  testCa.signSync('serving', '/CN=kube-apiserver', 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n');
  const ssl = (...args: string[]) => execFileSync('openssl', args, { cwd: dir, stdio: 'ignore' });
  ssl('genpkey', '-algorithm', 'EC', '-pkeyopt', 'ec_paramgen_curve:P-256', '-out', 'service-accounts.key');
  ssl('pkey', '-in', 'service-accounts.key', '-pubout', '-out', 'service-accounts.pub');
  // An API server that exits while starting is started again (on a fresh port), as a kubelet
  // restarts a static pod's: its port taken, or, on a loaded machine, a post-start hook (the
  // system priority classes) that ran out of time. One still running and not ready after a
  // minute is not tried again.
  try {
    return await onFreshPorts(() => startOnFreePort(binary, dir, testCa, etcd, options));
  } catch (err) {
    await etcd.stop();
    throw err;
  }
}

async function startOnFreePort(
  binary: string,
  dir: string,
  testCa: TestCa,
  etcd: EtcdServer,
  options: KubeServerOptions,
): Promise<KubeServer> {
  const port = await freePort();
  const url = `https://127.0.0.1:${port}`;
  const identity = (user: string, group?: string): Identity => {
    const name = `user-${user.replace(/[^a-z0-9]/gi, '-')}`;
    testCa.signSync(name, `/CN=${user}${group ? `/O=${group}` : ''}`, 'extendedKeyUsage=clientAuth\n');
    const kubeconfig = join(dir, `${name}.kubeconfig`);
    writeFileSync(kubeconfig, kubeconfigText(url, join(dir, 'ca.pem'), user, join(dir, `${name}.pem`), join(dir, `${name}.key`)));
    return { user, kubeconfig, cert: join(dir, `${name}.pem`), key: join(dir, `${name}.key`) };
  };
  const admin = identity('netplug-test-admin', 'system:masters');
  const plugin = identity('netplug-cni');

  const args = [
    `--etcd-servers=${etcd.endpoints}`,
    '--bind-address=127.0.0.1',
    `--secure-port=${port}`,
    `--tls-cert-file=${join(dir, 'serving.pem')}`,
    `--tls-private-key-file=${join(dir, 'serving.key')}`,
    `--client-ca-file=${join(dir, 'ca.pem')}`,
    `--service-account-key-file=${join(dir, 'service-accounts.pub')}`,
    `--service-account-signing-key-file=${join(dir, 'service-accounts.key')}`,
    '--service-account-issuer=https://kubernetes.default.svc',
    '--authorization-mode=RBAC',
    // As kubeadm's API servers do: netplug-node runs privileged (it serves the CNI plugin's calls).
    '--allow-privileged=true',
    '--service-cluster-ip-range=10.96.0.0/16',
    // No controller manager runs: no service account tokens to mount into pods.
    '--disable-admission-plugins=ServiceAccount',
    `--cert-dir=${join(dir, 'certs')}`,
    '--profiling=false',
    '--v=0',
  ];
  let child: ChildProcess | undefined = spawn(binary, args, {
    stdio: ['ignore', 'ignore', 'pipe'],
    env: options.goGc ? { ...process.env, GOGC: String(options.goGc) } : process.env,
  });
  let log = '';
  child.stderr?.on('data', (chunk: Buffer) => (log = (log + chunk.toString()).slice(-8000)));
  const started = child;
  // 'error' when it cannot be run at all; 'exit' otherwise.
  const exited = new Promise<void>((resolve) => {
    started.once('exit', () => resolve());
    started.once('error', () => resolve());
  });
  const stopApiServer = async () => {
    const running = child;
    child = undefined;
    if (running && running.exitCode === null && running.signalCode === null) {
      running.kill('SIGKILL');
      await exited;
    }
  };
  const server: KubeServer = {
    url,
    ca: join(dir, 'ca.pem'),
    serving: { cert: join(dir, 'serving.pem'), key: join(dir, 'serving.key') },
    admin,
    plugin,
    identity: (user) => identity(user),
    etcd,
    async stop() {
      await stopApiServer();
      await etcd.stop();
    },
  };
  if (await becameReady(server, exited)) return server;
  const running = started.exitCode === null && started.signalCode === null;
  await stopApiServer();
  if (running) throw new Error(`kube-apiserver did not become ready:\n${log}`);
  throw new ExitedWhileStarting(`kube-apiserver exited while starting:\n${log}`);
}

/** Whether the API server answers /readyz within a minute; false at once if it exits. */
async function becameReady(server: KubeServer, exited: Promise<void>): Promise<boolean> {
  let gone = false;
  void exited.then(() => (gone = true));
  for (let attempt = 0; attempt < 600 && !gone; attempt++) {
    if ((await get(server, '/readyz')) === 200) return true;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  return false;
}

/** The status of a GET as the administrator. */
function get(server: KubeServer, path: string): Promise<number> {
  return new Promise((resolve) => {
    const req = request(
      `${server.url}${path}`,
      { ca: readFileSync(server.ca), cert: readFileSync(server.admin.cert), key: readFileSync(server.admin.key), timeout: 2000 },
      (response) => {
        response.resume();
        resolve(response.statusCode ?? 0);
      },
    );
    req.on('error', () => resolve(0));
    req.on('timeout', () => req.destroy());
    req.end();
  });
}
