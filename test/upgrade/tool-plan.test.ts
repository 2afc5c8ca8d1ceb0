// netplugctl upgrade plan on a real kube-apiserver holding the previous release (v3.30.0) as its
// README installs it (`kubectl create -f crds.yaml netplug.yaml`): detection, the legacy field
// managers' fields, the server-side dry run, the ordered steps, the version window and the other
// preflight refusals, usage errors; and that plan writes nothing.
import test from 'ava';

import { NETPLUG_VERSION } from '../../ts/version.ts';
import { tempDir } from '../helpers/cni.ts';
import { startKube, type Kube } from '../helpers/kube.ts';
import { sharedTeardowns } from '../helpers/shared.ts';
import {
  adminKube,
  createNode,
  kubectlCreate,
  netplugctl,
  previousManifest,
  releaseFile,
  setClusterVersion,
  settleRollouts,
} from './tool-fixtures.ts';

let kube: Kube;
let kubeconfig: string;
const shared = sharedTeardowns(test);

test.before(async () => {
  kube = await startKube(shared);
  kubeconfig = kube.server.admin.kubeconfig;
  const dir = tempDir(shared, 'previous');
  kubectlCreate(kubeconfig, dir, 'crds.yaml', previousManifest('crds.yaml'));
  kubectlCreate(kubeconfig, dir, 'netplug.yaml', previousManifest('netplug.yaml'));
  const api = adminKube(kubeconfig);
  await createNode(api, 'node-a');
  await settleRollouts(api, 'kube-system');
  await setClusterVersion(kubeconfig, 'v3.30.0');
});

const planArgs = () => [
  'upgrade',
  'plan',
  '--kubeconfig',
  kubeconfig,
  '--manifest',
  releaseFile('netplug.yaml'),
  '--crds',
  releaseFile('crds.yaml'),
];

/** resourceVersion of every object in kube-system and of the CRDs: what a read-only command must leave alone. */
async function versions(): Promise<string> {
  const api = adminKube(kubeconfig);
  const kinds = [
    ['v1', 'ConfigMap'],
    ['apps/v1', 'DaemonSet'],
    ['apps/v1', 'Deployment'],
    ['v1', 'ServiceAccount'],
  ] as const;
  const all = [];
  for (const [apiVersion, kind] of kinds)
    for (const o of await api.list(apiVersion, kind, 'kube-system')) all.push(`${kind}/${o.metadata.name}@${o.metadata.resourceVersion}`);
  for (const o of await api.list('apiextensions.k8s.io/v1', 'CustomResourceDefinition'))
    all.push(`crd/${o.metadata.name}@${o.metadata.resourceVersion}`);
  return all.sort().join('\n');
}

test.serial(
  'plan detects a v3.30.0 manifest install, lists the kubectl-create fields the release drops, dry-runs every object and prints the steps; it writes nothing',
  async (t) => {
    const before = await versions();
    const run = await netplugctl(planArgs());
    t.log(run.out);
    t.is(run.code, 0, run.err);
    t.is(run.err, '');
    t.regex(run.out, new RegExp(`v3\\.30\\.0 → ${NETPLUG_VERSION}`));
    t.regex(run.out, /method: manifest/);
    t.regex(run.out, /datastore: kubernetes/);
    t.regex(run.out, /manifest: netplug\.yaml \(netplug routes pods between nodes\)/);
    t.regex(run.out, /IPAM: netplug-ipam; init container upgrade-ipam: present/);
    // The stale-field trap: kubectl-create owns what 3.31 dropped.
    t.regex(run.out, /DaemonSet kube-system\/netplug-node \(kubectl-create\): .*env\[name=NETPLUG_LEGACY_STATUS_FILE\]/);
    t.regex(run.out, /\.spec\.template\.spec\.initContainers\[name=upgrade-ipam\]/);
    t.regex(run.out, /\.spec\.template\.spec\.volumes\[name=legacy-status\]/);
    t.regex(run.out, /ok\s+version window: v3\.30\.0 → upgrade supported/);
    t.regex(
      run.out,
      /DaemonSet kube-system\/netplug-node: .* then, after the field-manager migration, removed: .*NETPLUG_LEGACY_STATUS_FILE/,
    );
    // Each diff lists its first fields only (3.31 adds the fast path's mounts, and the controllers'
    // leader election its env); the image is among the Deployment's.
    t.regex(run.out, /DaemonSet kube-system\/netplug-node: \d+ changed, \d+ added/);
    t.regex(
      run.out,
      /Deployment kube-system\/netplug-kube-controllers: \d+ changed(, \d+ added)?: .*\.containers\[netplug-kube-controllers\]\.image/,
    );
    const steps = [...run.out.matchAll(/^ {2}(\d+)\. /gm)].length;
    t.is(steps, 6);
    t.regex(run.out, /1\. Move fields owned by kubectl-create.*\n.*JSON patch: test \/metadata\/resourceVersion/);
    t.regex(run.out, /2\. Apply the release's \d+ CRDs/);
    t.regex(run.out, /3\. Apply the release manifest .*\[reversible/);
    t.regex(run.out, /4\. Wait for the rollout/);
    t.regex(run.out, /5\. Check the version/);
    t.regex(
      run.out,
      /6\. Read the release each node records .*v3\.30\.0 records none\) \[undone on rollback: once v3\.30\.0 runs on every node again, rollback removes every node's record \(PATCH Node <name> .*\n {7}LIST Nodes/,
    );
    t.regex(run.out, /^Ready: netplugctl upgrade apply --yes/m);
    t.is(await versions(), before, 'plan changed nothing (dry runs included)');
  },
);

test.serial('plan -o json: the same plan for scripts', async (t) => {
  const run = await netplugctl([...planArgs(), '-o', 'json']);
  t.is(run.code, 0, run.err);
  const plan = JSON.parse(run.out);
  t.is(plan.state, 'ready');
  t.is(plan.current, 'v3.30.0');
  t.is(plan.target, NETPLUG_VERSION);
  t.deepEqual(
    plan.steps.map((s: { id: string }) => s.id),
    ['migrate-field-managers', 'apply-crds', 'apply-manifest', 'wait-rollout', 'check-version', 'node-version-records'],
  );
  t.true(plan.dryRun.every((r: { outcome: string }) => r.outcome !== 'refused'));
  t.truthy(plan.dryRun.find((r: { object: { kind: string }; outcome: string }) => r.object.kind === 'DaemonSet' && r.outcome === 'change'));
  t.is(plan.install.nodes.length, 0, 'no node pods without a kubelet');
  t.regex(plan.hash, /^[0-9a-f]{64}$/);
});

test.serial('outside the supported window: a ClusterInformation at v3.14.2 is refused, naming the window', async (t) => {
  await setClusterVersion(kubeconfig, 'v3.14.2');
  t.teardown(() => setClusterVersion(kubeconfig, 'v3.30.0'));
  const run = await netplugctl(planArgs());
  t.is(run.code, 1);
  t.is(run.err.split('\n').filter(Boolean).length, 1, run.err);
  t.regex(
    run.err,
    /blocked: version window: the cluster runs v3\.14\.2, older than v3\.15\.0: upgrades to v3\.31\.\d+ are supported from v3\.15\.0 or later/,
  );
  t.regex(run.out, /BLOCKED version window/);
  const apply = await netplugctl(['upgrade', 'apply', '--yes', ...planArgs().slice(2)]);
  t.is(apply.code, 1);
  t.regex(apply.err, /the upgrade is blocked: version window/);
  t.is(
    await adminKube(kubeconfig).getOrNothing({ apiVersion: 'v1', kind: 'ConfigMap', name: 'netplug-upgrade', namespace: 'kube-system' }),
    undefined,
  );
});

test.serial('a cluster already at the target: nothing to do', async (t) => {
  await setClusterVersion(kubeconfig, NETPLUG_VERSION);
  t.teardown(() => setClusterVersion(kubeconfig, 'v3.30.0'));
  // The images still say v3.30.0: the lowest version found is what runs.
  const run = await netplugctl([...planArgs(), '-o', 'json']);
  t.is(run.code, 0);
  t.is(JSON.parse(run.out).current, 'v3.30.0');
});

test.serial(
  'an object owned by a netplug resource: listed, and the steps strip the reference first and restore it after the rollout',
  async (t) => {
    const api = adminKube(kubeconfig);
    const pool = await api.create({
      apiVersion: 'crd.projectnet.org/v1',
      kind: 'IPPool',
      metadata: { name: 'owner-pool' },
      spec: {
        kind: 'IPPool',
        apiVersion: 'projectnet.org/v3',
        metadata: { name: 'owner-pool' },
        spec: { cidr: '10.77.0.0/24', blockSize: 26 },
      },
    });
    const owned = { apiVersion: 'v1', kind: 'ConfigMap', name: 'owned-by-pool', namespace: 'default' };
    await api.create({
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: {
        name: owned.name,
        namespace: owned.namespace,
        ownerReferences: [{ apiVersion: 'crd.projectnet.org/v1', kind: 'IPPool', name: 'owner-pool', uid: pool.metadata.uid }],
      },
    });
    t.teardown(async () => {
      await api.delete(owned);
      await api.delete({ apiVersion: 'crd.projectnet.org/v1', kind: 'IPPool', name: 'owner-pool' });
    });
    const run = await netplugctl(planArgs());
    t.is(run.code, 0, run.err);
    t.regex(run.out, /owner references to netplug's API groups: \n {4}ConfigMap default\/owned-by-pool → IPPool owner-pool/);
    const plan = JSON.parse((await netplugctl([...planArgs(), '-o', 'json'])).out);
    t.deepEqual(
      plan.steps.map((s: { id: string }) => s.id),
      [
        'strip-owner-references',
        'migrate-field-managers',
        'apply-crds',
        'apply-manifest',
        'wait-rollout',
        'restore-owner-references',
        'check-version',
        'node-version-records',
      ],
    );
  },
);

test.serial('a node that is not Ready blocks the plan', async (t) => {
  const api = adminKube(kubeconfig);
  await createNode(api, 'node-b', false);
  t.teardown(() => api.delete({ apiVersion: 'v1', kind: 'Node', name: 'node-b' }));
  const run = await netplugctl(planArgs());
  t.is(run.code, 1);
  t.regex(run.err, /nodes Ready: not Ready: node-b/);
});

test.serial('apply without --yes prints the plan, changes nothing and exits 2', async (t) => {
  const before = await versions();
  const run = await netplugctl(['upgrade', 'apply', ...planArgs().slice(2)]);
  t.is(run.code, 2);
  t.regex(run.out, /^Steps$/m);
  t.regex(run.err, /nothing done: add --yes/);
  t.is(await versions(), before);
});

test.serial('usage mistakes: one line, exit 2', async (t) => {
  const cases: Array<[string[], RegExp]> = [
    [['upgrade'], /a subcommand is required: one of plan, apply, status, rollback/],
    [['upgrade', 'upgrayedd'], /unknown subcommand "upgrayedd"/],
    [['upgrade', 'plan', '--frobnicate'], /Unknown option '--frobnicate'/],
    [['upgrade', 'status', '--yes'], /--yes does not apply to status/],
    [['upgrade', 'plan', '-o', 'yaml'], /-o "yaml": only json is supported/],
    [['upgrade', 'apply', '--timeout', 'soon'], /--timeout "soon" is not a duration/],
    [['upgrade', 'plan', '--kubeconfig', kubeconfig], /--manifest FILE \(netplug\.yaml\)/],
    [['upgrade', 'plan', '--kubeconfig', kubeconfig, '--manifest', '/nonexistent.yaml'], /--manifest \/nonexistent\.yaml: ENOENT/],
    [['upgrade', 'plan', '--kubeconfig', kubeconfig, '--manifest', releaseFile('netplug.yaml')], /--crds FILE \(crds\.yaml\)/],
    [['upgrade', 'plan', '--kubeconfig', '/nonexistent'], /--kubeconfig \/nonexistent: ENOENT/],
    [
      ['upgrade', 'plan', '--kubeconfig', kubeconfig, '--manifest', releaseFile('netplug-etcd.yaml'), '--crds', releaseFile('crds.yaml')],
      /netplug-etcd\.yaml: the manifest given is of another kind than the install \(the etcd datastore, not the Kubernetes datastore\): give the release's netplug\.yaml with your edits; moving between datastores is netplugctl datastore migrate \(see netplugctl upgrade --help\)$/m,
    ],
  ];
  for (const [args, message] of cases) {
    const run = await netplugctl(args);
    t.is(run.code, 2, `${args.join(' ')}: ${run.err}`);
    t.regex(run.err, message);
    t.is(run.err.trim().split('\n').length, 1, run.err);
    t.notRegex(run.err, /\bat .*\.ts:\d+/, 'no stack trace');
  }
  const help = await netplugctl(['upgrade', '--help']);
  t.is(help.code, 0);
  t.regex(help.out, /^Usage: netplugctl upgrade plan\|apply\|status\|rollback/);
});
