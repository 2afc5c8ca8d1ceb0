// netplugctl flows without --server, on a real single-node cluster (a kubelet, which port-forward
// needs): the built netplug-flows runs in a pod labelled k8s-app=netplug-flows (the netplug image,
// for the shared libraries the executable loads, with the built executable from a hostPath, copied
// to the cluster's directory so that a rebuild of dist/ meanwhile does not touch it), its read port
// moved by NETPLUG_FLOWS_READ_LISTEN; its own service account's credentials make its TokenReviews
// (bound to system:auth-delegator). A busybox container in the pod posts batches to the write port
// with a TokenRequest's token for the writer service account. netplugctl finds the pod, and reads
// through the API server's port-forward: the table, -o json, and --follow.
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { copyFileSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';

import test from 'ava';
import * as k8s from '@kubernetes/client-node';

import { NETPLUG_IMAGE } from '../../scripts/lib/image-ref.ts';
import type { FlowRecord } from '../../ts/model/flow.ts';
import { apply, BUSYBOX_IMAGE, clusterPerFile, getJson } from '../helpers/cluster.ts';
import { ROOT } from '../helpers/cni.ts';
import { eventually } from '../helpers/eventually.ts';
import { NETPLUGCTL } from '../helpers/ipam.ts';
import { imageArchive } from '../e2e/install.ts';
import { flowRecord, pod } from './records.ts';

const cluster = clusterPerFile(test);
const NAMESPACE = 'flows-test';
const POD = 'netplug-flows-0';
const READ_PORT = 9500;
const exec = promisify(execFile);
let writerToken = '';
let setUp: Promise<void> | undefined;

/** The pod and the token, made by the first test (hooks run side by side with the cluster's own). */
async function start(): Promise<void> {
  const c = cluster();
  // ptp + host-local on the Node's pod CIDR: the node turns Ready and pods get addresses.
  const podCidr: string = (await getJson(c, 'node', c.nodeName)).spec.podCIDR;
  writeFileSync(
    join(c.cniConfDir, '10-ptp.conflist'),
    JSON.stringify({
      cniVersion: '1.0.0',
      name: 'ptp-flows',
      plugins: [
        {
          type: 'ptp',
          ipam: { type: 'host-local', ranges: [[{ subnet: podCidr }]], routes: [{ dst: '0.0.0.0/0' }], dataDir: join(c.dir, 'host-local') },
        },
      ],
    }),
  );
  await c.importImage(imageArchive());
  const bin = join(c.dir, 'flows-bin');
  mkdirSync(bin);
  copyFileSync(join(ROOT, 'dist/bin/netplug-flows'), join(bin, 'netplug-flows'));

  await apply(
    c,
    { apiVersion: 'v1', kind: 'Namespace', metadata: { name: NAMESPACE } },
    { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name: 'netplug-flows', namespace: NAMESPACE } },
    { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name: 'netplug-node', namespace: NAMESPACE } },
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRoleBinding',
      metadata: { name: 'netplug-flows-test' },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'system:auth-delegator' },
      subjects: [{ kind: 'ServiceAccount', name: 'netplug-flows', namespace: NAMESPACE }],
    },
    {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: POD, namespace: NAMESPACE, labels: { 'k8s-app': 'netplug-flows' } },
      spec: {
        serviceAccountName: 'netplug-flows',
        terminationGracePeriodSeconds: 1,
        volumes: [{ name: 'bin', hostPath: { path: bin, type: 'Directory' } }],
        containers: [
          {
            name: 'netplug-flows',
            image: NETPLUG_IMAGE,
            imagePullPolicy: 'Never',
            command: ['/flows/netplug-flows'],
            env: [
              { name: 'NETPLUG_FLOWS_READ_LISTEN', value: `127.0.0.1:${READ_PORT}` },
              { name: 'NETPLUG_FLOWS_WRITERS', value: `${NAMESPACE}:netplug-node` },
            ],
            volumeMounts: [{ name: 'bin', mountPath: '/flows', readOnly: true }],
            readinessProbe: { httpGet: { path: '/readyz', port: 9447 }, periodSeconds: 1 },
          },
          { name: 'poster', image: BUSYBOX_IMAGE, imagePullPolicy: 'Never', command: ['sleep', '3600'] },
        ],
      },
    },
  );
  await c.kubectl('-n', NAMESPACE, 'wait', '--for=condition=Ready', `pod/${POD}`, '--timeout=180s');
  const config = new k8s.KubeConfig();
  config.loadFromFile(c.kubeconfig);
  const issued = await config.makeApiClient(k8s.CoreV1Api).createNamespacedServiceAccountToken({
    name: 'netplug-node',
    namespace: NAMESPACE,
    body: { spec: { audiences: ['netplug-flows'], expirationSeconds: 3600 } },
  });
  writerToken = issued.status?.token ?? '';
}

/** Posts a batch from inside the pod (the write port is on the pod's network), as a node would. */
async function post(records: FlowRecord[]): Promise<string> {
  return kubectlOrLogs(
    ...['-n', NAMESPACE, 'exec', POD, '-c', 'poster', '--', 'wget', '-q', '-O', '-'],
    ...['--header', `Authorization: Bearer ${writerToken}`, '--header', 'Content-Type: application/json'],
    ...['--post-data', JSON.stringify({ records }), 'http://127.0.0.1:9445/v1/flows'],
  );
}

/** kubectl; failing, its error with netplug-flows' log. */
async function kubectlOrLogs(...args: string[]): Promise<string> {
  try {
    return await cluster().kubectl(...args);
  } catch (err) {
    const log = await cluster()
      .kubectl('-n', NAMESPACE, 'logs', POD, '-c', 'netplug-flows')
      .catch((failed: Error) => failed.message);
    throw new Error(`${(err as Error).message.slice(-300)}\nnetplug-flows' log:\n${log}`);
  }
}

const netplugctl = (...args: string[]) =>
  exec(NETPLUGCTL, ['flows', '--kubeconfig', cluster().kubeconfig, '--flows-namespace', NAMESPACE, ...args], {
    env: { PATH: '/usr/bin:/bin' },
    timeout: 60_000,
  });

test.serial('netplugctl flows finds netplug-flows and reads it through the API server’s port-forward', async (t) => {
  t.timeout(10 * 60_000);
  setUp ??= start();
  await setUp;
  const records = [
    flowRecord({ end: Date.now() - 1000, source: pod('shop', 'client', '10.1.0.1'), destination: pod('shop', 'web', '10.1.0.2', 80) }),
    flowRecord({
      end: Date.now(),
      action: 'Deny',
      source: pod('shop', 'batch', '10.1.0.3'),
      destination: pod('shop', 'web', '10.1.0.2', 80),
    }),
  ];
  t.is(await post(records), '{"accepted":2}\n');
  const table = await netplugctl('--namespace', 'shop');
  const lines = table.stdout.trimEnd().split('\n');
  t.is(lines.length, 3, table.stdout + table.stderr);
  t.regex(lines[1] ?? '', /shop\/client\s+shop\/web:80\s+TCP\s+dst\s+Allow\s+shop\/allow-web/);
  t.regex(lines[2] ?? '', /shop\/batch\s+shop\/web:80\s+TCP\s+dst\s+Deny/);
  const json = await netplugctl('-o', 'json', '--action', 'Deny');
  t.deepEqual(JSON.parse(json.stdout), { records: [records[1]] });
});

test.serial('netplugctl flows --follow through the port-forward prints a record posted after it started', async (t) => {
  setUp ??= start();
  await setUp;
  const child: ChildProcess = spawn(
    NETPLUGCTL,
    ['flows', '--follow', '--kubeconfig', cluster().kubeconfig, '--flows-namespace', NAMESPACE, '--pod', 'shop/late'],
    { env: { PATH: '/usr/bin:/bin' } },
  );
  t.teardown(() => child.kill('SIGKILL'));
  let stdout = '';
  let stderr = '';
  child.stdout?.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  await eventually('the header', () => stdout.startsWith('TIME'), { context: () => stderr });
  await eventually(
    'the record posted after the start',
    async () => {
      await post([flowRecord({ source: pod('shop', 'late', '10.1.0.9'), destination: pod('shop', 'web', '10.1.0.2', 80) })]);
      return stdout.includes('shop/late');
    },
    { intervalMs: 1000, context: () => stdout + stderr },
  );
  child.kill('SIGINT');
  t.is(await exited, 0, stderr);
});
