// The helm chart charts/netplug-operator: its generated files are what scripts/generate-chart.ts
// writes, its versions are the release's, helm lints it, and what `helm template` renders is
// exactly the operator's objects of ts/render/operator.ts in the release's namespace, with the
// image and the Installation from values.
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

import { load, loadAll } from 'js-yaml';
import test from 'ava';

import { CHART_VERSION, CRD_SOURCES, chartFiles } from '../../scripts/lib/chart-files.ts';
import type { KubeObject } from '../../ts/render/objects.ts';
import { renderOperator } from '../../ts/render/operator.ts';
import { RELEASE_IMAGE } from '../../ts/render/release.ts';
import { NETPLUG_VERSION } from '../../ts/version.ts';
import { ROOT } from '../helpers/cni.ts';
import { CHART_PATH, isolatedHelm } from './helm.ts';

const NAMESPACE = 'netplug-operator';
const packageVersion = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')).version as string;

/** The objects of a `helm template` run, in a stable order. */
function rendered(yaml: string): KubeObject[] {
  return sortedObjects((loadAll(yaml) as (KubeObject | null)[]).filter((object) => object !== null));
}

const sortedObjects = (objects: KubeObject[]) =>
  [...objects].sort((a, b) => `${a.kind}/${a.metadata.name}`.localeCompare(`${b.kind}/${b.metadata.name}`));

/** What the chart should render: renderOperator's objects in `namespace` (its own Namespace is the release's), and the Installation. */
function expected(options: { image: string; namespace: string; installation?: object }): KubeObject[] {
  const objects = renderOperator(options.image)
    .filter((object) => object.kind !== 'Namespace')
    .map((object) => JSON.parse(JSON.stringify(object).replaceAll(`"namespace":"${NAMESPACE}"`, `"namespace":"${options.namespace}"`)));
  if (options.installation) {
    objects.push({
      apiVersion: 'operator.projectnet.org/v1',
      kind: 'Installation',
      metadata: { name: 'default' },
      spec: options.installation,
    });
  }
  return sortedObjects(objects);
}

test('the generated chart files are what scripts/generate-chart.ts writes (run npm run generate:chart after a change)', (t) => {
  const files = chartFiles(ROOT);
  for (const [name, text] of Object.entries(files)) t.is(readFileSync(join(CHART_PATH, name), 'utf8'), text, name);
  t.deepEqual(
    readdirSync(join(CHART_PATH, 'crds')).sort(),
    Object.keys(files)
      .filter((name) => name.startsWith('crds/'))
      .map((name) => name.slice('crds/'.length))
      .sort(),
    'crds/ holds the CRDs of deploy/ and nothing else',
  );
});

test("the chart's versions and default image are the release's", (t) => {
  const chart = load(readFileSync(join(CHART_PATH, 'Chart.yaml'), 'utf8')) as { name: string; version: string; appVersion: string };
  t.is(chart.name, 'netplug-operator');
  t.is(chart.version, packageVersion);
  t.is(CHART_VERSION, packageVersion);
  t.is(chart.appVersion, `v${packageVersion}`);
  t.is(chart.appVersion, NETPLUG_VERSION);
  const values = load(readFileSync(join(CHART_PATH, 'values.yaml'), 'utf8')) as any;
  t.is(`${values.image.repository}:${values.image.tag}`, RELEASE_IMAGE);
  t.is(values.image.pullPolicy, 'IfNotPresent');
  t.deepEqual(values.installation, { enabled: true, spec: {} });
  // Empty: the operator's defaults (enforcement Enabled, /var/run/netplug).
  t.deepEqual(values.policy, { enforcement: '', endpointStatusPathPrefix: '' });
});

test('helm lint passes, strictly', async (t) => {
  const helm = isolatedHelm(t);
  const output = await helm('lint', '--strict', CHART_PATH);
  t.regex(output, /1 chart\(s\) linted, 0 chart\(s\) failed/);
});

test("helm template with the default values renders the operator's objects and an Installation default with an empty spec", async (t) => {
  const helm = isolatedHelm(t);
  const objects = rendered(await helm('template', 'netplug', CHART_PATH, '--namespace', NAMESPACE));
  t.deepEqual(objects, expected({ image: RELEASE_IMAGE, namespace: NAMESPACE, installation: {} }));
});

test('helm template takes the image, the namespace and the Installation from values', async (t) => {
  const helm = isolatedHelm(t);
  const spec = {
    calicoNetwork: { ipPools: [{ cidr: '10.244.0.0/16', blockSize: 24 }], linuxPolicySetupTimeoutSeconds: 10 },
    cni: { ipam: { type: 'HostLocal' } },
  };
  const objects = rendered(
    await helm(
      'template',
      'netplug',
      CHART_PATH,
      '--namespace',
      'cni-operator',
      '--set',
      'image.repository=registry.example/netplug,image.tag=v3.31.7',
      '--set-json',
      `installation.spec=${JSON.stringify(spec)}`,
    ),
  );
  t.deepEqual(objects, expected({ image: 'registry.example/netplug:v3.31.7', namespace: 'cni-operator', installation: spec }));

  const withoutInstallation = rendered(
    await helm('template', 'netplug', CHART_PATH, '--set', 'installation.enabled=false,image.tag=,image.pullPolicy=Always'),
  );
  const defaultNamespace = expected({ image: `localhost/netplug:${NETPLUG_VERSION}`, namespace: 'default' });
  const deployment = defaultNamespace.find((object) => object.kind === 'Deployment') as any;
  deployment.spec.template.spec.containers[0].imagePullPolicy = 'Always';
  t.deepEqual(withoutInstallation, defaultNamespace, 'no Installation; an empty tag is the appVersion; the pull policy from values');
});

test("helm template: the policy values go into the Installation's spec.policy, over installation.spec's", async (t) => {
  const helm = isolatedHelm(t);
  const installation = async (...args: string[]) =>
    rendered(await helm('template', 'netplug', CHART_PATH, '--namespace', NAMESPACE, ...args)).find(
      (o) => o.kind === 'Installation',
    ) as any;
  t.deepEqual((await installation('--set', 'policy.enforcement=Disabled')).spec, { policy: { enforcement: 'Disabled' } });
  const spec = { cni: { fastPath: 'Enabled' }, policy: { enforcement: 'Disabled', endpointStatusPathPrefix: '/run/np' } };
  t.deepEqual((await installation('--set-json', `installation.spec=${JSON.stringify(spec)}`, '--set', 'policy.enforcement=Enabled')).spec, {
    cni: { fastPath: 'Enabled' },
    policy: { enforcement: 'Enabled', endpointStatusPathPrefix: '/run/np' },
  });
  t.deepEqual((await installation('--set', 'policy.endpointStatusPathPrefix=/srv/netplug')).spec, {
    policy: { endpointStatusPathPrefix: '/srv/netplug' },
  });
});

test('helm template: flowLogs values create FlowLogAggregator default (with its spec) and FlowViewer default; none by default', async (t) => {
  const helm = isolatedHelm(t);
  const flows = async (...args: string[]) =>
    rendered(await helm('template', 'netplug', CHART_PATH, '--namespace', NAMESPACE, ...args)).filter((o) =>
      ['FlowLogAggregator', 'FlowViewer'].includes(o.kind),
    );
  t.deepEqual(await flows(), []);
  const spec = { retention: '30m', maxBytes: '8Mi', flushInterval: 5 };
  t.deepEqual(
    await flows(
      '--set',
      'flowLogs.aggregator.enabled=true,flowLogs.viewer.enabled=true',
      '--set-json',
      `flowLogs.aggregator.spec=${JSON.stringify(spec)}`,
    ),
    [
      { apiVersion: 'operator.projectnet.org/v1', kind: 'FlowLogAggregator', metadata: { name: 'default' }, spec },
      { apiVersion: 'operator.projectnet.org/v1', kind: 'FlowViewer', metadata: { name: 'default' }, spec: {} },
    ],
  );
  t.deepEqual(
    (await flows('--set', 'flowLogs.aggregator.enabled=true')).map((o) => [o.kind, o.spec]),
    [['FlowLogAggregator', {}]],
  );
});

test("the chart's crds/ are the operator's and netplug's CRDs, as helm shows them", async (t) => {
  const helm = isolatedHelm(t);
  const shown = (loadAll(await helm('show', 'crds', CHART_PATH)) as (KubeObject | null)[]).filter((doc) => doc !== null);
  const sources = CRD_SOURCES.filter((source) => existsSync(join(ROOT, source))).flatMap((source) =>
    readdirSync(join(ROOT, source))
      .filter((name) => name.endsWith('.yaml'))
      .map((name) => load(readFileSync(join(ROOT, source, name), 'utf8')) as KubeObject),
  );
  t.true(sources.length >= 7);
  t.deepEqual(sortedObjects(shown), sortedObjects(sources));
});
