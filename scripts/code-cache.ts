// Trains V8's code cache for the single executable: loads the wrapped bundle the way sea-main.ts
// does, runs every program's main paths as functions, then saves the cache of all the functions
// compiled by then. Run by build.ts: node scripts/code-cache.ts <wrapped bundle> <cache out>.
//
// Training needs no root, kernel or etcd: the data-plane addon is replaced by a stand-in module
// (NETPLUG_ADDON_PATH), etcd by a stand-in of its JSON gateway on loopback, host-local by a
// script. They only steer the bundle's code through its paths; what they answer is not tested
// here (the test suite runs the real ones).
import { mkdtempSync, rmSync, writeFileSync, chmodSync, readFileSync, mkdirSync } from 'node:fs';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { Script } from 'node:vm';

const [wrappedPath, cachePath] = process.argv.slice(2);
if (!wrappedPath || !cachePath) throw new Error('usage: node scripts/code-cache.ts <wrapped bundle> <cache out>');

type Io = { env: Record<string, string>; readStdin(): Buffer; stderr(text: string): void; pid: number };
interface Programs {
  plugin(): Promise<{ runMain(io: Io, program?: 'netplug' | 'netplug-ipam'): Promise<{ stdout: string; exitCode: number }> }>;
  ctl(): Promise<{
    runCtlMain(argv: string[], env: Record<string, string>): Promise<{ stdout: string; stderr: string; exitCode: number }>;
  }>;
}

/** A stand-in for etcd's JSON gateway: range and txn over a map, with revisions. */
function gatewayStandIn() {
  const data = new Map<string, { value: string; mod: number; version: number }>();
  let revision = 1;
  const inRange = (key: string, start: string, end: string | undefined) =>
    end === undefined ? key === start : key >= start && (end === '\0' || key < end);
  const range = (r: { key: string; range_end?: string; keys_only?: boolean }) => {
    const start = Buffer.from(r.key, 'base64').toString('latin1');
    const end = r.range_end === undefined ? undefined : Buffer.from(r.range_end, 'base64').toString('latin1');
    const kvs = [...data.entries()]
      .filter(([key]) => inRange(key, start, end))
      .sort(([a], [b]) => (a < b ? -1 : 1))
      .map(([key, kv]) => ({
        key: Buffer.from(key, 'latin1').toString('base64'),
        ...(r.keys_only ? {} : { value: kv.value }),
        mod_revision: String(kv.mod),
        version: String(kv.version),
      }));
    return { header: { revision: String(revision) }, kvs, count: String(kvs.length) };
  };
  const handle = (path: string, body: any) => {
    if (path === '/v3/kv/range') return range(body);
    const holds = (c: any) => {
      const kv = data.get(Buffer.from(c.key, 'base64').toString('latin1'));
      return c.target === 'VERSION' ? String(kv?.version ?? 0) === c.version : String(kv?.mod ?? 0) === c.mod_revision;
    };
    const succeeded = (body.compare ?? []).every(holds);
    if (!succeeded) return { header: { revision: String(revision) }, succeeded: false };
    revision++;
    const responses = (body.success ?? []).map((op: any) => {
      if (op.request_range) return { response_range: range(op.request_range) };
      const target = op.request_put ?? op.request_delete_range;
      const key = Buffer.from(target.key, 'base64').toString('latin1');
      if (op.request_put) data.set(key, { value: op.request_put.value, mod: revision, version: (data.get(key)?.version ?? 0) + 1 });
      else data.delete(key);
      return {};
    });
    return { header: { revision: String(revision) }, succeeded: true, responses };
  };
  return createServer((request: IncomingMessage, response: ServerResponse) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      const answer = JSON.stringify(handle(request.url ?? '', JSON.parse(Buffer.concat(chunks).toString() || '{}')));
      response.writeHead(200, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(answer) });
      response.end(answer);
    });
  });
}

const ADDON_STAND_IN = `
const iface = (name, index) => ({ name, index, mac: 'ee:ee:ee:ee:ee:ee' });
exports.hostInterfaceName = (prefix) => prefix + '0'.repeat(11);
exports.interfacePresence = async () => ({ presence: 'absent' });
exports.setupWorkload = async (spec) => ({ interfaces: { host: iface(spec.hostIfname, 10), container: iface(spec.containerIfname, 2), mtu: 1500,
  routes: spec.addresses.map((a) => a.includes(':') ? { destination: '::/0', gateway: 'fe80::ecee:eeff:feee:eeee' } : { destination: '0.0.0.0/0', gateway: '169.254.1.1' }) } });
exports.teardownWorkload = async () => ({ result: 'removed' });
exports.teardownAttachment = async () => ({ result: 'removed' });
exports.checkWorkload = async () => ({ differences: [] });
// The HTTP agent, over Node's fetch (only here: training may load it freely).
exports.HttpAgent = class {
  constructor(options) { this.options = options; }
  async request(spec) {
    try {
      const response = await fetch(spec.url, { method: spec.method, headers: spec.headers, body: spec.body });
      return { status: response.status, headers: Object.fromEntries(response.headers), body: Buffer.from(await response.arrayBuffer()) };
    } catch (err) {
      return { error: { kind: 'connect', message: String(err) } };
    }
  }
};
`;

const HOST_LOCAL_STAND_IN = `#!/bin/sh
cat >/dev/null
[ "$CNI_COMMAND" = ADD ] && printf '{"cniVersion":"1.0.0","ips":[{"address":"10.1.0.2/24","gateway":"10.1.0.1"}],"routes":[{"dst":"10.9.0.0/16"}],"dns":{}}'
exit 0
`;

/** A stand-in for the Kubernetes API: the pod and the namespace Kubernetes mode reads. */
function kubeStandIn() {
  const objects: Record<string, unknown> = {
    '/api/v1/namespaces/train/pods/train-pod': {
      metadata: { name: 'train-pod', namespace: 'train', uid: 'u', labels: { app: 'train' }, annotations: {} },
      spec: { serviceAccountName: 'default', containers: [{ ports: [{ name: 'http', containerPort: 80 }] }] },
    },
    '/api/v1/namespaces/train': { metadata: { name: 'train', labels: {}, annotations: {} } },
  };
  return createServer((request: IncomingMessage, response: ServerResponse) => {
    const found = objects[request.url ?? ''];
    const body = JSON.stringify(found ?? { kind: 'Status', reason: 'NotFound', details: { name: 'x' } });
    response.writeHead(found ? 200 : 404, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body) });
    response.end(body);
  });
}

/**
 * The pod's path only: ADD, CHECK, DEL, GC, STATUS and VERSION, with netplug-ipam and with
 * host-local. The executable deserialises the whole cache on every start (some 5 µs per KB), so
 * netplugctl and failure paths, rare on a node, are left to compile when they run.
 */
async function train(programs: Programs, scratch: string, endpoint: string, kubeApi: string): Promise<void> {
  const { runMain } = await programs.plugin();
  const { runCtlMain } = await programs.ctl();
  const ctl = (...argv: string[]) => runCtlMain(argv, { ETCD_ENDPOINTS: endpoint });
  const netns = join(scratch, 'netns');
  writeFileSync(netns, '');
  const cni = (command: string, netconf: unknown, extra: Record<string, string> = {}, program: 'netplug' | 'netplug-ipam' = 'netplug') =>
    runMain(
      {
        env: {
          CNI_COMMAND: command,
          CNI_CONTAINERID: 'train-0123456789',
          CNI_NETNS: netns,
          CNI_IFNAME: 'eth0',
          CNI_PATH: join(scratch, 'bin'),
          ...extra,
        },
        readStdin: () => Buffer.from(JSON.stringify(netconf)),
        stderr: () => undefined,
        pid: process.pid,
      },
      program,
    );

  // Pools and a node, made through netplugctl (whose few functions for it land in the cache too).
  await ctl('pool', 'create', 'v4', '--cidr', '10.20.0.0/16');
  await ctl('pool', 'create', 'v6', '--cidr', 'fd20::/48');
  await ctl('node', 'create', 'train-node', '--label', 'zone=a');

  const base = {
    cniVersion: '1.1.0',
    name: 'train',
    type: 'netplug',
    etcd_endpoints: endpoint,
    nodename: 'train-node',
    log_file_path: join(scratch, 'log', 'cni.log'),
  };
  for (const ipam of [{ type: 'netplug-ipam' }, { type: 'netplug-ipam', assign_ipv6: 'true' }]) {
    const conf = { ...base, ipam };
    for (const command of ['VERSION', 'STATUS', 'ADD', 'CHECK', 'GC', 'DEL']) await cni(command, conf);
    await cni('ADD', conf, {}, 'netplug-ipam');
    await cni('DEL', conf, {}, 'netplug-ipam');
  }
  // Kubernetes mode: a YAML kubeconfig (as node agents write them), the pod and namespace read.
  const kubeconfig = join(scratch, 'kubeconfig');
  writeFileSync(
    kubeconfig,
    `apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: ${kubeApi}\nusers:\n- name: u\n  user:\n    token: t\ncontexts:\n- name: x\n  context:\n    cluster: c\n    user: u\ncurrent-context: x\n`,
  );
  const k8sConf = { ...base, ipam: { type: 'netplug-ipam' }, kubernetes: { kubeconfig }, policy: { type: 'k8s' } };
  for (const command of ['ADD', 'DEL'])
    await cni(command, k8sConf, { CNI_ARGS: 'IgnoreUnknown=1;K8S_POD_NAMESPACE=train;K8S_POD_NAME=train-pod' });
  const hostLocal = {
    cniVersion: '1.0.0',
    name: 'train-hl',
    type: 'netplug',
    mtu: 1400,
    ipam: { type: 'host-local', subnet: '10.1.0.0/24' },
  };
  for (const command of ['ADD', 'CHECK', 'DEL']) await cni(command, hostLocal);
}

const scratch = mkdtempSync(join(tmpdir(), 'netplug-code-cache-'));
const server = gatewayStandIn();
const kubeServer = kubeStandIn();
try {
  mkdirSync(join(scratch, 'bin'));
  writeFileSync(join(scratch, 'addon.cjs'), ADDON_STAND_IN);
  writeFileSync(join(scratch, 'bin', 'host-local'), HOST_LOCAL_STAND_IN);
  chmodSync(join(scratch, 'bin', 'host-local'), 0o755);
  process.env['NETPLUG_ADDON_PATH'] = join(scratch, 'addon.cjs');
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const endpoint = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  await new Promise<void>((resolve) => kubeServer.listen(0, '127.0.0.1', resolve));
  const kubeApi = `http://127.0.0.1:${(kubeServer.address() as AddressInfo).port}`;

  const script = new Script(readFileSync(wrappedPath, 'utf8'), { filename: 'netplug.cjs' });
  const bundle = { exports: {} as { programs: Programs } };
  script.runInThisContext()(bundle.exports, createRequire(wrappedPath), bundle, wrappedPath, dirname(wrappedPath));
  await train(bundle.exports.programs, scratch, endpoint, kubeApi);
  writeFileSync(cachePath, script.createCachedData());
} finally {
  server.close();
  kubeServer.close();
  rmSync(scratch, { recursive: true, force: true });
}
