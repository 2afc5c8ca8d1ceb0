// deploy/manifests/netplug-flow-viewer.yaml (generated from ts/render/flow-viewer.ts; the drift
// test in test/deploy/manifests.test.ts covers it): the viewer is a reader netplug-flows.yaml
// names, with a projected token for the aggregator's audience and no API credentials, serving on
// the pod's loopback only, and its environment is one netplug-flow-viewer starts with.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

import { loadAllYaml } from '@kubernetes/client-node';
import test from 'ava';

import { RELEASE_IMAGE } from '../../ts/render/release.ts';
import { viewerSettings } from '../../ts/viewer/settings.ts';

const ROOT = new URL('../../', import.meta.url).pathname;
const reference = readFileSync(join(ROOT, 'docs/configuration.md'), 'utf8');
const docs = (name: string) => JSON.parse(JSON.stringify(loadAllYaml(readFileSync(join(ROOT, 'deploy/manifests', name), 'utf8')))) as any[];

test('netplug-flow-viewer.yaml: a reader of netplug-flows with a projected token, no API rights, the page on the loopback', (t) => {
  const objects = docs('netplug-flow-viewer.yaml');
  t.deepEqual(
    objects.map((doc) => `${doc.kind} ${doc.metadata.name}`),
    ['ServiceAccount netplug-flow-viewer', 'Service netplug-flow-viewer', 'Deployment netplug-flow-viewer'],
  );
  t.true(objects.every((doc) => doc.metadata.namespace === 'kube-system'));
  const account = objects[0];
  t.false(account.automountServiceAccountToken);

  const deployment = objects[2];
  const pod = deployment.spec.template.spec;
  t.is(pod.serviceAccountName, 'netplug-flow-viewer');
  t.false(pod.automountServiceAccountToken, 'no API credentials: it only reads netplug-flows');
  t.falsy(pod.hostNetwork);
  const [container, ...others] = pod.containers;
  t.is(others.length, 0);
  t.is(container.image, RELEASE_IMAGE);
  t.deepEqual(container.command, ['/usr/bin/netplug-flow-viewer']);
  const env = Object.fromEntries(container.env.map((e: { name: string; value: string }) => [e.name, e.value]));

  // The reader netplug-flows.yaml names is this service account.
  const flows = docs('netplug-flows.yaml').find((doc) => doc.kind === 'Deployment');
  const flowsEnv = Object.fromEntries(
    flows.spec.template.spec.containers[0].env.map((e: { name: string; value: string }) => [e.name, e.value]),
  );
  t.is(flowsEnv['NETPLUG_FLOWS_READERS'], `${deployment.metadata.namespace}:${pod.serviceAccountName}`);

  // The token: projected for netplug-flows' audience, where NETPLUG_VIEWER_TOKEN_FILE says.
  const mount = container.volumeMounts.find((m: { mountPath: string }) => env['NETPLUG_VIEWER_TOKEN_FILE'].startsWith(`${m.mountPath}/`));
  t.true(mount?.readOnly);
  const volume = pod.volumes.find((v: { name: string }) => v.name === mount.name);
  t.deepEqual(volume.projected.sources, [
    {
      serviceAccountToken: {
        audience: 'netplug-flows',
        expirationSeconds: 3600,
        path: env['NETPLUG_VIEWER_TOKEN_FILE'].slice(mount.mountPath.length + 1),
      },
    },
  ]);

  // The settings as the kubelet gives them (netplug-flows' Service first: its service links).
  const settings = viewerSettings({ ...env, NETPLUG_FLOWS_SERVICE_HOST: '10.96.0.20', NETPLUG_FLOWS_SERVICE_PORT: '9445' });
  t.deepEqual(settings.listen, { host: '127.0.0.1', port: 9449 });
  t.is(settings.flowsUrl, 'http://10.96.0.20:9445');
  const flowsService = docs('netplug-flows.yaml').find((doc) => doc.kind === 'Service');
  t.is(flowsService.spec.ports[0].port, 9445, "the Service's first port, NETPLUG_FLOWS_SERVICE_PORT, is the write port");
  t.true(pod.enableServiceLinks);

  // Probes on the health port; the page is not a container port, nor reached through the Service's cluster IP.
  t.like(container.livenessProbe, { httpGet: { path: '/livez', port: settings.health.port } });
  t.like(container.readinessProbe, { httpGet: { path: '/readyz', port: settings.health.port } });
  t.deepEqual(container.ports, [{ name: 'metrics', containerPort: settings.health.port, protocol: 'TCP' }]);
  const service = objects[1];
  t.deepEqual(service.spec.selector, deployment.spec.template.metadata.labels);
  t.deepEqual(service.spec.ports, [{ name: 'http', port: 9449, targetPort: 9449, protocol: 'TCP' }]);
});

test('viewer settings: bad values are named with their value; without a URL nor the Service, a line says what to do', (t) => {
  t.throws(() => viewerSettings({ NETPLUG_VIEWER_FLOWS_URL: 'ftp://x', NETPLUG_VIEWER_LISTEN: 'nine' }), {
    message:
      'NETPLUG_VIEWER_LISTEN "nine" must be host:port, such as 127.0.0.1:9449; NETPLUG_VIEWER_FLOWS_URL "ftp://x" must be an http:// or https:// URL such as http://netplug-flows.kube-system.svc:9445',
  });
  t.throws(() => viewerSettings({}), { message: /^NETPLUG_VIEWER_FLOWS_URL is not set and there is no Service netplug-flows/ });
  t.is(viewerSettings({ NETPLUG_VIEWER_FLOWS_URL: 'https://flows.example:9445/' }).flowsUrl, 'https://flows.example:9445');
  t.is(viewerSettings({ NETPLUG_FLOWS_SERVICE_HOST: 'fd00::12', NETPLUG_FLOWS_SERVICE_PORT: '9445' }).flowsUrl, 'http://[fd00::12]:9445');
});

test('every environment variable netplug-flow-viewer reads is in docs/configuration.md', (t) => {
  const read = new Set<string>();
  const env = new Proxy({} as NodeJS.ProcessEnv, {
    get(_target, name) {
      if (typeof name === 'string' && /^[A-Z][A-Z0-9_]*$/.test(name)) read.add(name);
      return undefined;
    },
  });
  t.throws(() => viewerSettings(env), { message: /^NETPLUG_VIEWER_FLOWS_URL is not set/ });
  t.true(read.has('NETPLUG_VIEWER_TOKEN_FILE'), 'the settings were read');
  t.deepEqual(
    [...read].filter((name) => !reference.includes(`\`${name}\``)),
    [],
  );
});
