// The admission policy of the address annotations against a real kube-apiserver, applied as
// deploy/manifests/netplug.yaml ships it (server-side, as `kubectl apply --server-side`): a pod
// that sets cni.projectnet.org/ipAddrsNoIpam or floatingIPs in a namespace without the label is
// refused, on CREATE and on an UPDATE that sets or changes the value, with a message naming the
// annotation and the label; a labelled namespace, an exempt one, and pods without them are not
// concerned. kube-apiserver enforces a policy once its informer has it: the file waits for a known
// refusal before any test runs.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

import test from 'ava';
import * as k8s from '@kubernetes/client-node';

import { ANNOTATIONS } from '../../ts/model/pod-annotations.ts';
import { ADDRESS_ANNOTATIONS_ALLOWED, ADDRESS_ANNOTATIONS_LABEL, EXEMPT_NAMESPACES } from '../../ts/render/address-annotation-admission.ts';
import { ROOT } from '../helpers/cni.ts';
import { eventually } from '../helpers/eventually.ts';
import { type Kube, startKube } from '../helpers/kube.ts';
import { sharedTeardowns } from '../helpers/shared.ts';

const shared = sharedTeardowns(test);
let kube: Kube;

const RISKY = [ANNOTATIONS.ipAddrsNoIpam, ANNOTATIONS.floatingIPs];
const VALUES: Record<string, string> = {
  [ANNOTATIONS.ipAddrsNoIpam]: '["10.99.0.5"]',
  [ANNOTATIONS.floatingIPs]: '["10.98.0.1"]',
};

/** What kube-apiserver says when it refuses a pod (code and message), or undefined when it admitted it. */
type Refusal = { code: number; message: string };

async function refusal(write: () => Promise<unknown>): Promise<Refusal | undefined> {
  try {
    await write();
    return undefined;
  } catch (err) {
    if (!(err instanceof k8s.ApiException)) throw err;
    const body = typeof err.body === 'string' ? JSON.parse(err.body) : err.body;
    return { code: err.code, message: body?.message ?? String(err.body) };
  }
}

let made = 0;

async function namespace(labels: Record<string, string> = {}): Promise<string> {
  const name = `admission-${made++}`;
  await kube.core.createNamespace({ body: { metadata: { name, labels } } });
  return name;
}

const podBody = (name: string, annotations: Record<string, string> = {}): k8s.V1Pod => ({
  metadata: { name, annotations },
  spec: { containers: [{ name: 'main', image: 'busybox' }] },
});

const createPod = (ns: string, annotations: Record<string, string> = {}, name = `pod-${made++}`) =>
  refusal(() => kube.core.createNamespacedPod({ namespace: ns, body: podBody(name, annotations) }));

const patchPod = (ns: string, name: string, metadata: object) =>
  refusal(() =>
    kube.core.patchNamespacedPod(
      { namespace: ns, name, body: { metadata } },
      k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch),
    ),
  );

const refusedFor = (key: string, ns: string) =>
  new RegExp(
    `pod annotation ${key.replaceAll('.', '\\.')} is not allowed in namespace ${ns}: only pods in a namespace labelled ${ADDRESS_ANNOTATIONS_LABEL.replaceAll('.', '\\.')}=${ADDRESS_ANNOTATIONS_ALLOWED} may set it`,
  );

const label = (ns: string, value: string | null) =>
  kube.core.patchNamespace(
    { name: ns, body: { metadata: { labels: { [ADDRESS_ANNOTATIONS_LABEL]: value } } } },
    k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch),
  );

test.before(async () => {
  kube = await startKube(shared);
  const shipped = k8s
    .loadAllYaml(readFileSync(join(ROOT, 'deploy/manifests/netplug.yaml'), 'utf8'))
    .filter((doc: k8s.KubernetesObject) => doc.kind?.startsWith('ValidatingAdmissionPolicy'));
  const objects = k8s.KubernetesObjectApi.makeApiClient(kube.config);
  for (const object of shipped) await objects.patch(object, undefined, undefined, 'kubectl', true, k8s.PatchStrategy.ServerSideApply);
  // Enforced once the API server's policy informer has both objects: wait for a known refusal.
  const probe = await namespace();
  await eventually('the policy enforced', async () => {
    const name = `probe-${made++}`;
    const refused = await createPod(probe, { [ANNOTATIONS.ipAddrsNoIpam]: VALUES[ANNOTATIONS.ipAddrsNoIpam]! }, name);
    if (!refused) await kube.core.deleteNamespacedPod({ namespace: probe, name, gracePeriodSeconds: 0 });
    return refused !== undefined;
  });
});

test('the manifest ships the policy and its binding, failing closed, on every datastore', (t) => {
  for (const file of ['netplug.yaml', 'netplug-etcd.yaml', 'netplug-host-local.yaml']) {
    const docs = k8s.loadAllYaml(readFileSync(join(ROOT, 'deploy/manifests', file), 'utf8')) as any[];
    const policy = docs.find((doc) => doc.kind === 'ValidatingAdmissionPolicy');
    t.is(policy?.spec.failurePolicy, 'Fail', file);
    t.like(docs.find((doc) => doc.kind === 'ValidatingAdmissionPolicyBinding')?.spec, { policyName: policy?.metadata.name }, file);
  }
});

for (const key of RISKY) {
  test(`${key}: refused in a namespace without the label, naming the annotation and the label; allowed once it is labelled`, async (t) => {
    const ns = await namespace();
    const refused = await createPod(ns, { [key]: VALUES[key]! });
    t.is(refused?.code, 403, JSON.stringify(refused));
    t.regex(refused?.message ?? '', refusedFor(key, ns));
    t.regex(refused?.message ?? '', /ValidatingAdmissionPolicy 'netplug-address-annotations'/);
    t.log(refused?.message);

    await label(ns, ADDRESS_ANNOTATIONS_ALLOWED);
    // The API server reads the namespace's labels from its own cache: admitted once it has the label.
    const name = `allowed-${made++}`;
    await eventually('admitted in the labelled namespace', async () => (await createPod(ns, { [key]: VALUES[key]! }, name)) === undefined);
    const admitted = await kube.core.readNamespacedPod({ namespace: ns, name });
    t.is(admitted.metadata?.annotations?.[key], VALUES[key], 'stored with its annotation');
  });
}

test('a pod without the annotations is admitted, also with the other address annotations', async (t) => {
  const ns = await namespace();
  t.is(await createPod(ns), undefined);
  t.is(await createPod(ns, { [ANNOTATIONS.ipAddrs]: '["10.99.0.6"]', [ANNOTATIONS.ipv4pools]: '["default"]' }), undefined);
});

test('another value of the label allows nothing', async (t) => {
  const ns = await namespace({ [ADDRESS_ANNOTATIONS_LABEL]: 'yes' });
  t.regex(
    (await createPod(ns, { [ANNOTATIONS.floatingIPs]: VALUES[ANNOTATIONS.floatingIPs]! }))?.message ?? '',
    refusedFor(ANNOTATIONS.floatingIPs, ns),
  );
});

test('an update that adds the annotation is refused; one that removes it is admitted', async (t) => {
  const ns = await namespace();
  t.is(await createPod(ns, {}, 'plain'), undefined);
  for (const key of RISKY) {
    const refused = await patchPod(ns, 'plain', { annotations: { [key]: VALUES[key] } });
    t.is(refused?.code, 403, JSON.stringify(refused));
    t.regex(refused?.message ?? '', refusedFor(key, ns));
  }
  t.is(await patchPod(ns, 'plain', { labels: { tier: 'web' } }), undefined, 'an update without them is admitted');
});

test('a pod admitted while its namespace was labelled keeps its annotation: other updates admitted, a changed value refused', async (t) => {
  const ns = await namespace({ [ADDRESS_ANNOTATIONS_LABEL]: ADDRESS_ANNOTATIONS_ALLOWED });
  await eventually('admitted in the labelled namespace', async () => (await createPod(ns, VALUES, 'fixed')) === undefined);
  await label(ns, null);
  await eventually('a new one refused once the label is gone', async () => (await createPod(ns, VALUES)) !== undefined);
  t.is(await patchPod(ns, 'fixed', { labels: { tier: 'web' } }), undefined, 'its labels can change');
  const changed = await patchPod(ns, 'fixed', { annotations: { [ANNOTATIONS.floatingIPs]: '["10.98.0.2"]' } });
  t.regex(changed?.message ?? '', refusedFor(ANNOTATIONS.floatingIPs, ns));
  t.is(await patchPod(ns, 'fixed', { annotations: { [ANNOTATIONS.floatingIPs]: null } }), undefined, 'removing it is admitted');
});

test("kube-system and netplug's namespaces are exempt: the control plane's and netplug's own pods never depend on the policy", async (t) => {
  for (const ns of EXEMPT_NAMESPACES) {
    await kube.core.readNamespace({ name: ns }).catch(() => kube.core.createNamespace({ body: { metadata: { name: ns } } }));
    t.is(await createPod(ns, VALUES), undefined, ns);
  }
});
