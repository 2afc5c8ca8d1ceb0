// The upgrade's extra steps for host-local installs
// against a real kube-apiserver: a v3.30-style host-local install made with `kubectl create`
// (its DaemonSet carrying the init container upgrade-ipam, no USE_POD_CIDR), the server-side apply
// of the 3.31 manifest that keeps upgrade-ipam (kubectl-create owns it), the spec's jq pipeline, and
// `netplugctl migrate host-local`: dry run, one guarded patch, idempotent, refusals. The objects are
// built here from this release's renderer (not the v3.30.0 tag, which a clone may lack); the real
// v3.30.0 under the real kubelet is test/upgrade/host-local.test.ts.
import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';

import test from 'ava';
import * as k8s from '@kubernetes/client-node';

import { runClusterCtlMain } from '../../ts/cli/cluster-commands.ts';
import { hostLocalPatch, ipamTypeOf } from '../../ts/migrate/host-local.ts';
import { renderManifest } from '../../ts/render/manifests.ts';
import type { KubeObject } from '../../ts/render/objects.ts';
import { RELEASE_IMAGE, releaseFiles } from '../../ts/render/release.ts';
import { ROOT, tempDir } from '../helpers/cni.ts';
import { startKube, type Kube } from '../helpers/kube.ts';
import { sharedTeardowns } from '../helpers/shared.ts';

const PREVIOUS_IMAGE = 'localhost/netplug:v3.30.0';
const files = releaseFiles(join(ROOT, 'deploy'));
const docsOf = (name: string) => k8s.loadAllYaml(files[name] ?? '') as any[];

test('the 3.31 host-local manifest: host-local with the pod CIDR, USE_POD_CIDR on netplug-node, no upgrade-ipam, the right to watch its Node', (t) => {
  const docs = docsOf('netplug-host-local.yaml');
  const configMap = docs.find((doc) => doc.kind === 'ConfigMap');
  const template: string = configMap.data.cni_network_config;
  t.is(ipamTypeOf(template), 'host-local');
  t.deepEqual(JSON.parse(template.replaceAll(/__[A-Z_]+__/g, '0')).plugins[0].ipam, { type: 'host-local', subnet: 'usePodCidr' });
  t.false('ipv4_pool_cidr' in configMap.data, 'no pool settings: host-local takes each node its pod CIDR');
  const pod = docs.find((doc) => doc.kind === 'DaemonSet').spec.template.spec;
  t.is(pod.initContainers, undefined);
  const env = pod.containers.find((c: any) => c.name === 'netplug-node').env;
  t.deepEqual(JSON.parse(JSON.stringify(env.filter((e: any) => e.name === 'USE_POD_CIDR'))), [{ name: 'USE_POD_CIDR', value: 'true' }]);
  t.false(env.some((e: any) => e.name.startsWith('NETPLUG_IPV4POOL')));
  const binding = docs.find((doc) => doc.kind === 'ClusterRoleBinding' && doc.metadata.name === 'netplug-node-pod-cidrs');
  t.deepEqual(JSON.parse(JSON.stringify(binding.subjects)), [{ kind: 'ServiceAccount', name: 'netplug-node', namespace: 'kube-system' }]);
  t.deepEqual(
    JSON.parse(JSON.stringify(docs.find((doc) => doc.kind === 'ClusterRole' && doc.metadata.name === 'netplug-node-pod-cidrs').rules)),
    [{ apiGroups: [''], resources: ['nodes'], verbs: ['list', 'watch'] }],
  );
  // The other manifests are netplug-ipam's, and grant nothing of it.
  t.is(ipamTypeOf(docsOf('netplug.yaml').find((doc) => doc.kind === 'ConfigMap').data.cni_network_config), 'netplug-ipam');
  t.false(docsOf('netplug.yaml').some((doc) => doc.metadata.name === 'netplug-node-pod-cidrs'));
});

test('ipamTypeOf: the netplug plugin of a conflist or a netconf; undefined for what is not JSON', (t) => {
  t.is(
    ipamTypeOf('{"plugins": [{"type": "netplug", "mtu": __CNI_MTU__, "ipam": {"type": "host-local"}}, {"type": "portmap"}]}'),
    'host-local',
  );
  t.is(ipamTypeOf('{"type": "netplug", "ipam": {"type": "netplug-ipam"}}'), 'netplug-ipam');
  t.is(ipamTypeOf('{"plugins": [{"type": "netplug"}]}'), undefined);
  t.is(ipamTypeOf('not json'), undefined);
  t.is(ipamTypeOf(undefined), undefined);
});

test('the patch tests what it read: the resourceVersion, the names at their indexes; nothing when both are done', (t) => {
  const ds = (init: string[], env: k8s.V1EnvVar[] | undefined): k8s.V1DaemonSet => ({
    metadata: { resourceVersion: '7' },
    spec: {
      selector: {},
      template: {
        spec: {
          ...(init.length ? { initContainers: init.map((name) => ({ name })) } : {}),
          containers: [{ name: 'other' }, { name: 'netplug-node', ...(env ? { env } : {}) }],
        },
      },
    },
  });
  t.deepEqual(hostLocalPatch(ds(['a', 'upgrade-ipam'], [{ name: 'X', value: '1' }])), [
    { op: 'test', path: '/metadata/resourceVersion', value: '7' },
    { op: 'test', path: '/spec/template/spec/initContainers/1/name', value: 'upgrade-ipam' },
    { op: 'remove', path: '/spec/template/spec/initContainers/1' },
    { op: 'test', path: '/spec/template/spec/containers/1/name', value: 'netplug-node' },
    { op: 'add', path: '/spec/template/spec/containers/1/env/-', value: { name: 'USE_POD_CIDR', value: 'true' } },
  ]);
  t.deepEqual(hostLocalPatch(ds(['upgrade-ipam'], [{ name: 'USE_POD_CIDR', value: 'true' }])), [
    { op: 'test', path: '/metadata/resourceVersion', value: '7' },
    { op: 'test', path: '/spec/template/spec/initContainers/0/name', value: 'upgrade-ipam' },
    { op: 'remove', path: '/spec/template/spec/initContainers/0' },
  ]);
  t.deepEqual(hostLocalPatch(ds([], [{ name: 'USE_POD_CIDR', value: 'false' }])), [
    { op: 'test', path: '/metadata/resourceVersion', value: '7' },
    { op: 'test', path: '/spec/template/spec/containers/1/name', value: 'netplug-node' },
    { op: 'test', path: '/spec/template/spec/containers/1/env/0/name', value: 'USE_POD_CIDR' },
    { op: 'replace', path: '/spec/template/spec/containers/1/env/0', value: { name: 'USE_POD_CIDR', value: 'true' } },
  ]);
  t.deepEqual(hostLocalPatch(ds([], undefined)).at(-1), {
    op: 'add',
    path: '/spec/template/spec/containers/1/env',
    value: [{ name: 'USE_POD_CIDR', value: 'true' }],
  });
  t.deepEqual(hostLocalPatch(ds(['a'], [{ name: 'USE_POD_CIDR', value: 'true' }])), []);
});

let kube: Kube;
let apps: k8s.AppsV1Api;
let core: k8s.CoreV1Api;
let dir: string;
const shared = sharedTeardowns(test);

test.before(async () => {
  kube = await startKube(shared);
  dir = tempDir(shared, 'host-local');
  const config = kube.config;
  apps = config.makeApiClient(k8s.AppsV1Api);
  core = config.makeApiClient(k8s.CoreV1Api);
});

function kubectlBinary(): string {
  const binaries = execFileSync('sh', [join(ROOT, 'scripts/kube-binaries.sh')], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] });
  return join(binaries.trim(), 'kubectl');
}

/** kubectl as the administrator; its stdout. */
function kubectl(...args: string[]): string {
  return execFileSync(kubectlBinary(), [`--kubeconfig=${kube.server.admin.kubeconfig}`, ...args], {
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'pipe'],
  });
}

let written = 0;
function writeObjects(objects: object[]): string {
  const file = join(dir, `objects-${written++}.yaml`);
  writeFileSync(file, objects.map((object) => `---\n${k8s.dumpYaml(object)}`).join(''));
  return file;
}

/** The 3.31 host-local manifest's ConfigMap and DaemonSet, in `namespace`. */
function release(namespace: string, ipam: 'host-local' | 'netplug-ipam' = 'host-local'): KubeObject[] {
  return renderManifest({ datastore: 'kubernetes', namespace, image: RELEASE_IMAGE, ipam }).filter(
    (o) => o.kind === 'ConfigMap' || o.kind === 'DaemonSet',
  );
}

/** What v3.30.0's host-local manifest installed: the same with its image, the pool settings instead of USE_POD_CIDR, and upgrade-ipam. */
function previous(namespace: string, ipam: 'host-local' | 'netplug-ipam' = 'host-local'): KubeObject[] {
  const objects = structuredClone(release(namespace, ipam)) as any[];
  const pod = objects.find((o) => o.kind === 'DaemonSet').spec.template.spec;
  for (const container of pod.containers) {
    container.image = PREVIOUS_IMAGE;
    container.env = container.env.filter((e: any) => e.name !== 'USE_POD_CIDR');
  }
  pod.initContainers = [
    {
      name: 'upgrade-ipam',
      image: PREVIOUS_IMAGE,
      command: ['/usr/bin/netplug-install', '--upgrade-ipam'],
      env: [{ name: 'CNI_NETWORK_CONFIG', valueFrom: { configMapKeyRef: { name: 'netplug-config', key: 'cni_network_config' } } }],
    },
  ];
  return objects;
}

async function createNamespace(t: { teardown(fn: () => unknown): void }, name: string, objects: KubeObject[]): Promise<void> {
  await core.createNamespace({ body: { metadata: { name } } });
  t.teardown(() => core.deleteNamespace({ name }).catch(() => {}));
  kubectl('create', '-f', writeObjects(objects));
}

const daemonSet = (namespace: string) => apps.readNamespacedDaemonSet({ name: 'netplug-node', namespace });
const initNames = (ds: k8s.V1DaemonSet) => (ds.spec?.template.spec?.initContainers ?? []).map((c) => c.name);
/** The netplug-node container's USE_POD_CIDR entries, as plain objects. */
const usePodCidrOf = (ds: k8s.V1DaemonSet) =>
  JSON.parse(
    JSON.stringify(
      ds.spec?.template.spec?.containers.find((c) => c.name === 'netplug-node')?.env?.filter((e) => e.name === 'USE_POD_CIDR'),
    ),
  );

async function netplugctl(...args: string[]): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const io = {
    out: (text: string) => {
      out += text;
    },
    err: (text: string) => {
      err += text;
    },
    signal: new AbortController().signal,
  };
  const code = await runClusterCtlMain(['migrate', 'host-local', ...args], { PATH: process.env['PATH'] ?? '' }, io);
  return { code, out, err };
}

test.serial('a server-side apply of the 3.31 manifest keeps upgrade-ipam: kubectl-create owns it', async (t) => {
  await createNamespace(t, 'trap', previous('trap'));
  const created = await daemonSet('trap');
  t.true(
    created.metadata?.managedFields?.some(
      (entry) => entry.manager === 'kubectl-create' && JSON.stringify(entry.fieldsV1).includes('f:initContainers'),
    ),
  );
  kubectl('apply', '--server-side', '--force-conflicts', '-f', writeObjects(release('trap')));
  const applied = await daemonSet('trap');
  t.deepEqual(initNames(applied), ['upgrade-ipam'], 'upgrade-ipam survives the apply of a manifest without it');
  t.is(applied.spec?.template.spec?.initContainers?.[0]?.image, PREVIOUS_IMAGE);
  t.deepEqual(usePodCidrOf(applied), [{ name: 'USE_POD_CIDR', value: 'true' }]);
});

// The pipeline is a client-side apply of the whole live object. Without a last-applied-configuration
// (kubectl create makes none) its three-way merge computes no deletion, so it removes nothing: it
// only adds the annotation. It works on an install made with client-side `kubectl apply`, whose
// last applied configuration lists upgrade-ipam.
test.serial("the spec's jq pipeline says `configured` but leaves upgrade-ipam on a DaemonSet made with kubectl create", async (t) => {
  await createNamespace(t, 'pipeline', previous('pipeline'));
  const kubectlPath = kubectlBinary();
  // kubectl keeps a discovery cache under $HOME/.kube: a home of the test's own, not the caller's directory.
  const home = tempDir(t, 'kubectl-home');
  const pipeline = `"$KUBECTL" get ds netplug-node -n pipeline -o json | jq 'del(.spec.template.spec.initContainers[]? | select(.name == "upgrade-ipam"))' | "$KUBECTL" apply -f -`;
  const output = execFileSync('sh', ['-c', pipeline], {
    encoding: 'utf8',
    env: { PATH: process.env['PATH'] ?? '/usr/bin:/bin', HOME: home, KUBECTL: kubectlPath, KUBECONFIG: kube.server.admin.kubeconfig },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  t.log(`the pipeline printed: ${output.trim()}`);
  t.is(output.trim(), 'daemonset.apps/netplug-node configured');
  const after = await daemonSet('pipeline');
  t.deepEqual(initNames(after), ['upgrade-ipam'], 'still there');
  const lastApplied = JSON.parse(after.metadata?.annotations?.['kubectl.kubernetes.io/last-applied-configuration'] ?? '{}');
  t.deepEqual(lastApplied.spec.template.spec.initContainers ?? [], [], 'what it did: recorded a configuration without it');
  // Run again, it has the annotation to go by, but that never listed upgrade-ipam: still there.
  execFileSync('sh', ['-c', pipeline], {
    env: { PATH: process.env['PATH'] ?? '/usr/bin:/bin', HOME: home, KUBECTL: kubectlPath, KUBECONFIG: kube.server.admin.kubeconfig },
    stdio: 'ignore',
  });
  t.deepEqual(initNames(await daemonSet('pipeline')), ['upgrade-ipam']);
  // The precise form (a JSON patch that tests the name at its index first) does it.
  kubectl(
    'patch',
    'daemonset',
    'netplug-node',
    '-n',
    'pipeline',
    '--type=json',
    '-p',
    '[{"op":"test","path":"/spec/template/spec/initContainers/0/name","value":"upgrade-ipam"},{"op":"remove","path":"/spec/template/spec/initContainers/0"}]',
  );
  t.deepEqual(initNames(await daemonSet('pipeline')), []);
});

test.serial('migrate host-local: a dry run changes nothing; then one patch (one rollout); a second run has nothing to do', async (t) => {
  await createNamespace(t, 'steps', previous('steps'));
  const before = await daemonSet('steps');

  const dry = await netplugctl('--kubeconfig', kube.server.admin.kubeconfig, '-n', 'steps', '--dry-run');
  t.is(dry.err, '');
  t.is(dry.code, 0);
  t.is(
    dry.out,
    'DaemonSet steps/netplug-node: host-local install (ipam.type host-local in ConfigMap steps/netplug-config key cni_network_config)\n' +
      `would remove the init container upgrade-ipam (image ${PREVIOUS_IMAGE}) from DaemonSet steps/netplug-node\n` +
      'would set USE_POD_CIDR=true on container netplug-node\n' +
      'dry run: nothing changed\n',
  );
  t.is((await daemonSet('steps')).metadata?.resourceVersion, before.metadata?.resourceVersion);

  const done = await netplugctl('--kubeconfig', kube.server.admin.kubeconfig, '--namespace', 'steps');
  t.is(done.code, 0, done.err);
  t.regex(done.out, /^removed the init container upgrade-ipam \(image localhost\/netplug:v3\.30\.0\) from DaemonSet steps\/netplug-node$/m);
  t.regex(done.out, /^set USE_POD_CIDR=true on container netplug-node$/m);
  const after = await daemonSet('steps');
  t.deepEqual(initNames(after), []);
  t.deepEqual(usePodCidrOf(after), [{ name: 'USE_POD_CIDR', value: 'true' }]);
  t.is(after.metadata?.generation, (before.metadata?.generation ?? 0) + 1, 'one change of the pod template: one rollout');
  t.true(after.metadata?.managedFields?.some((entry) => entry.manager === 'netplugctl'));

  const again = await netplugctl('--kubeconfig', kube.server.admin.kubeconfig, '-n', 'steps');
  t.is(again.code, 0);
  t.regex(
    again.out,
    /no init container upgrade-ipam: nothing to remove\nUSE_POD_CIDR is true on container netplug-node already\nnothing to do/,
  );
  t.is((await daemonSet('steps')).metadata?.resourceVersion, after.metadata?.resourceVersion);

  // Then the documented apply: nothing of upgrade-ipam comes back, USE_POD_CIDR once.
  kubectl('apply', '--server-side', '--force-conflicts', '-f', writeObjects(release('steps')));
  const applied = await daemonSet('steps');
  t.deepEqual(initNames(applied), []);
  t.deepEqual(usePodCidrOf(applied), [{ name: 'USE_POD_CIDR', value: 'true' }]);
  t.is(applied.spec?.template.spec?.containers[0]?.image, RELEASE_IMAGE);
});

test.serial('the built netplugctl, as the README runs it', async (t) => {
  await createNamespace(t, 'built', previous('built'));
  const run = (...args: string[]) =>
    execFileSync(join(ROOT, 'dist/bin/netplugctl'), ['migrate', 'host-local', ...args], {
      encoding: 'utf8',
      env: { PATH: '/usr/bin:/bin', KUBECONFIG: kube.server.admin.kubeconfig },
    });
  t.regex(
    run('-n', 'built', '--dry-run'),
    /would remove the init container upgrade-ipam .*\nwould set USE_POD_CIDR=true on container netplug-node\ndry run: nothing changed\n$/,
  );
  t.deepEqual(initNames(await daemonSet('built')), ['upgrade-ipam']);
  t.regex(run('-n', 'built'), /^removed the init container upgrade-ipam /m);
  t.deepEqual(initNames(await daemonSet('built')), []);
  t.deepEqual(usePodCidrOf(await daemonSet('built')), [{ name: 'USE_POD_CIDR', value: 'true' }]);
});

test.serial('a DaemonSet changed after it was read fails the patch test and is left as it is', async (t) => {
  await createNamespace(t, 'guard', previous('guard'));
  const read = await daemonSet('guard');
  const patch = hostLocalPatch(read);
  // Someone adds a variable meanwhile: the stale patch's test of the resourceVersion fails.
  await apps.patchNamespacedDaemonSet(
    {
      name: 'netplug-node',
      namespace: 'guard',
      body: [{ op: 'add', path: '/spec/template/spec/containers/0/env/-', value: { name: 'USE_POD_CIDR', value: 'false' } }],
    },
    k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.JsonPatch),
  );
  const changed = await daemonSet('guard');
  const error = await t.throwsAsync(
    apps.patchNamespacedDaemonSet(
      { name: 'netplug-node', namespace: 'guard', body: patch },
      k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.JsonPatch),
    ),
  );
  t.is((error as k8s.ApiException<unknown>).code, 422);
  t.log(`the stale patch: ${(error as k8s.ApiException<unknown>).body}`);
  t.is((await daemonSet('guard')).metadata?.resourceVersion, changed.metadata?.resourceVersion);
  // The command reads again: USE_POD_CIDR replaced, not added twice.
  const done = await netplugctl('--kubeconfig', kube.server.admin.kubeconfig, '-n', 'guard');
  t.is(done.code, 0, done.err);
  t.deepEqual(usePodCidrOf(await daemonSet('guard')), [{ name: 'USE_POD_CIDR', value: 'true' }]);
  t.deepEqual(initNames(await daemonSet('guard')), []);
});

test.serial('refused, changing nothing: a netplug-ipam install, an operator install, no DaemonSet; usage mistakes', async (t) => {
  await createNamespace(t, 'ipam', previous('ipam', 'netplug-ipam'));
  const before = await daemonSet('ipam');
  const ipam = await netplugctl('--kubeconfig', kube.server.admin.kubeconfig, '-n', 'ipam');
  t.is(ipam.code, 1);
  t.is(
    ipam.err,
    'netplugctl migrate host-local: not a host-local install: the conflist template (ConfigMap ipam/netplug-config key cni_network_config) has ipam.type "netplug-ipam"; nothing changed\n',
  );
  t.is(ipam.out, '');
  t.is((await daemonSet('ipam')).metadata?.resourceVersion, before.metadata?.resourceVersion);

  const operated = structuredClone(previous('operated')) as any[];
  operated.find((o) => o.kind === 'DaemonSet').metadata.labels['app.kubernetes.io/managed-by'] = 'netplug-operator';
  await createNamespace(t, 'operated', operated);
  const operator = await netplugctl('--kubeconfig', kube.server.admin.kubeconfig, '-n', 'operated');
  t.is(operator.code, 1);
  t.regex(operator.err, /DaemonSet operated\/netplug-node is managed by netplug-operator, which sets USE_POD_CIDR itself/);
  t.deepEqual(initNames(await daemonSet('operated')), ['upgrade-ipam']);

  const missing = await netplugctl('--kubeconfig', kube.server.admin.kubeconfig, '-n', 'nowhere');
  t.is(missing.code, 1);
  t.is(missing.err, 'netplugctl migrate host-local: no DaemonSet nowhere/netplug-node: is netplug installed in namespace nowhere (-n)?\n');

  const flag = await netplugctl('--kubeconfig', kube.server.admin.kubeconfig, '--force');
  t.is(flag.code, 2);
  t.regex(flag.err, /^netplugctl migrate host-local: Unknown option '--force'.*\(netplugctl migrate host-local --help\)\n$/);
  const namespace = await netplugctl('-n', 'Not_A_Namespace');
  t.is(namespace.code, 2);
  t.is(
    namespace.err,
    'netplugctl migrate host-local: --namespace "Not_A_Namespace" is not a namespace name (netplugctl migrate host-local --help)\n',
  );
  const noConfig = await netplugctl('--kubeconfig', join(dir, 'absent'));
  t.is(noConfig.code, 1);
  t.regex(noConfig.err, /kubeconfig ".*absent" does not exist/);
  const help = await netplugctl('--help');
  t.is(help.code, 0);
  t.regex(help.out, /^usage: netplugctl migrate host-local \[--kubeconfig FILE\] \[-n NAMESPACE\] \[--dry-run\]/);
});
