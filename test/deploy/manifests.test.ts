// The release manifests are generated (npm run generate:manifests) from ts/render/: the committed
// files must be exactly what the template source gives, and say what a cluster needs.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

import { loadAllYaml } from '@kubernetes/client-node';
import test from 'ava';

import { POLICY_WATCH_RULES } from '../../ts/node/policy/follow-resources.ts';
import { RELEASE_IMAGE, releaseFiles } from '../../ts/render/release.ts';
import { NETPLUG_VERSION } from '../../ts/version.ts';

const ROOT = new URL('../../', import.meta.url).pathname;
const files = releaseFiles(join(ROOT, 'deploy'));
type Doc = { kind: string; metadata: { name: string; namespace?: string }; spec?: any; data?: Record<string, string> };
const docs = (name: string) => loadAllYaml(readFileSync(join(ROOT, 'deploy/manifests', name), 'utf8')) as Doc[];

test('deploy/manifests is what ts/render generates (run npm run generate:manifests after a change)', (t) => {
  for (const [name, text] of Object.entries(files)) t.is(readFileSync(join(ROOT, 'deploy/manifests', name), 'utf8'), text, name);
});

test('every container runs the release image, never pulled', (t) => {
  t.is(RELEASE_IMAGE, `localhost/netplug:${NETPLUG_VERSION}`);
  for (const name of ['netplug.yaml', 'netplug-etcd.yaml']) {
    const workloads = docs(name).filter((doc) => doc.kind === 'DaemonSet' || doc.kind === 'Deployment');
    t.deepEqual(
      workloads.map((doc) => doc.metadata.name),
      ['netplug-node', 'netplug-kube-controllers'],
    );
    for (const doc of workloads)
      for (const container of doc.spec.template.spec.containers) {
        t.is(container.image, RELEASE_IMAGE);
        t.is(container.imagePullPolicy, 'IfNotPresent');
      }
    t.true(docs(name).every((doc) => doc.metadata.namespace === undefined || doc.metadata.namespace === 'kube-system'));
  }
});

test('the node pod: agent first, install-cni second, on the standard host paths', (t) => {
  const daemonSet = docs('netplug.yaml').find((doc) => doc.kind === 'DaemonSet');
  const pod = daemonSet?.spec.template.spec;
  t.deepEqual(
    pod.containers.map((container: { name: string }) => container.name),
    ['netplug-node', 'install-cni'],
  );
  t.deepEqual(
    pod.volumes
      .filter((volume: { hostPath?: unknown }) => volume.hostPath)
      .map((volume: { hostPath: { path: string } }) => volume.hostPath.path),
    ['/opt/cni/bin', '/etc/cni/net.d', '/var/lib/netplug', '/var/run/netplug', '/var/log/netplug/cni'],
  );
  t.true(pod.hostNetwork);
});

test('the fast path is on by default (netplug-config fast_path), the agent sees the host paths as the plugin does, and Prometheus finds /metrics', (t) => {
  for (const name of ['netplug.yaml', 'netplug-etcd.yaml', 'netplug-host-local.yaml']) {
    const config = docs(name).find((doc) => doc.kind === 'ConfigMap' && doc.metadata.name === 'netplug-config');
    t.is(config?.data?.['fast_path'], 'true', name);
    // Plain objects: the YAML loader gives the client's classes.
    const template = JSON.parse(JSON.stringify(docs(name).find((doc) => doc.kind === 'DaemonSet')?.spec.template));
    const [agent, installer] = template.spec.containers;
    const fastPath = { name: 'FAST_PATH', valueFrom: { configMapKeyRef: { key: 'fast_path', name: 'netplug-config', optional: true } } };
    for (const container of [agent, installer])
      t.deepEqual(
        container.env.find((e: { name: string }) => e.name === 'FAST_PATH'),
        fastPath,
      );
    const env = Object.fromEntries(agent.env.map((e: { name: string; value?: string }) => [e.name, e.value]));
    t.like(env, { NETPLUG_AGENT_SOCKET: '/var/run/netplug/cni.sock', NETPLUG_METRICS_ADDR: ':9091', NETPLUG_VAR_DIR: '/var/lib/netplug' });
    t.true(agent.securityContext.privileged);
    // Each mount at its host path: the plugin's calls name host paths.
    const hostPaths = new Map(template.spec.volumes.map((v: any) => [v.name, v.hostPath?.path]));
    for (const mount of agent.volumeMounts.filter((m: { name: string }) => m.name !== 'etcd-certs'))
      t.is(mount.mountPath, hostPaths.get(mount.name), mount.name);
    // Pod network namespaces come from the shim, one per call: nothing depends on mount propagation.
    t.false(
      template.spec.containers.some((c: any) => c.volumeMounts.some((m: any) => m.mountPropagation !== undefined)),
      'no propagated mount',
    );
    t.deepEqual(agent.ports, [{ name: 'metrics', containerPort: 9091, protocol: 'TCP' }]);
    t.like(template.metadata.annotations, {
      'prometheus.io/scrape': 'true',
      'prometheus.io/port': '9091',
      'prometheus.io/path': '/metrics',
    });
  }
});

test("network policy: on as shipped (netplug-config policy_enforcement); on the Kubernetes datastore netplug-node's ClusterRole grants its watches, on etcd the controllers copy the objects", (t) => {
  const plain = (value: unknown) => JSON.parse(JSON.stringify(value));
  for (const name of ['netplug.yaml', 'netplug-host-local.yaml', 'netplug-etcd.yaml']) {
    const kdd = name !== 'netplug-etcd.yaml';
    const config = docs(name).find((doc) => doc.kind === 'ConfigMap' && doc.metadata.name === 'netplug-config');
    t.is(config?.data?.['policy_enforcement'], 'true', name);
    t.is(config?.data?.['endpoint_status_path_prefix'], '/var/run/netplug', name);
    const template = plain(docs(name).find((doc) => doc.kind === 'DaemonSet')?.spec.template);
    const agentEnv = template.spec.containers[0].env;
    const fromConfig = (variable: string) =>
      agentEnv.find((e: { name: string }) => e.name === variable)?.valueFrom?.configMapKeyRef ?? null;
    t.deepEqual(fromConfig('NETPLUG_POLICY_ENFORCEMENT'), { key: 'policy_enforcement', name: 'netplug-config', optional: true });
    t.deepEqual(fromConfig('NETPLUG_ENDPOINT_STATUS_PATH_PREFIX'), {
      key: 'endpoint_status_path_prefix',
      name: 'netplug-config',
      optional: true,
    });
    if (!kdd) {
      // On etcd netplug-node reads policy from etcd, where these controllers write it.
      const controllers = plain(docs(name).find((doc) => doc.kind === 'Deployment' && doc.metadata.name === 'netplug-kube-controllers'));
      const enabled = controllers.spec.template.spec.containers[0].env.find((e: { name: string }) => e.name === 'ENABLED_CONTROLLERS');
      t.deepEqual(enabled?.value.split(',').sort(), ['ipam', 'node', 'policy', 'profile', 'workloadendpoint']);
      continue;
    }
    // The plugin waits where the agent writes: the prefix's endpoint-status/, on a host path the agent mounts.
    t.regex(config?.data?.['cni_network_config'] ?? '', /"endpoint_status_dir": "\/var\/run\/netplug\/endpoint-status"/);
    t.true(template.spec.containers[0].volumeMounts.some((m: { mountPath: string }) => m.mountPath === '/var/run/netplug'));
    const role = plain(docs(name).find((doc) => doc.kind === 'ClusterRole' && doc.metadata.name === 'netplug-node'));
    for (const rule of POLICY_WATCH_RULES)
      t.true(
        role.rules.some((r: unknown) => JSON.stringify(r) === JSON.stringify(rule)),
        JSON.stringify(rule),
      );
  }
});

test("one edit per CNI directory: its hostPath, anchored, moves the agent's mount and install-cni's CNI_NET_DIR with it", (t) => {
  for (const name of ['netplug.yaml', 'netplug-etcd.yaml', 'netplug-host-local.yaml']) {
    // As a user of k3s would edit the manifest: the hostPath of each directory, nothing else.
    const text = readFileSync(join(ROOT, 'deploy/manifests', name), 'utf8')
      .replace('path: &cni-bin-dir /opt/cni/bin', 'path: &cni-bin-dir /var/lib/rancher/k3s/data/current/bin')
      .replace('path: &cni-net-dir /etc/cni/net.d', 'path: &cni-net-dir /var/lib/rancher/k3s/agent/etc/cni/net.d');
    const pod = (loadAllYaml(text) as Doc[]).find((doc) => doc.kind === 'DaemonSet')?.spec.template.spec;
    const [agent, installer] = pod.containers;
    const hostPath = (volume: string) => pod.volumes.find((v: any) => v.name === volume).hostPath.path;
    const mountPath = (volume: string) => agent.volumeMounts.find((m: any) => m.name === volume).mountPath;
    t.is(hostPath('cni-bin-dir'), '/var/lib/rancher/k3s/data/current/bin', name);
    t.is(mountPath('cni-bin-dir'), '/var/lib/rancher/k3s/data/current/bin', name);
    t.is(hostPath('cni-net-dir'), '/var/lib/rancher/k3s/agent/etc/cni/net.d', name);
    t.is(mountPath('cni-net-dir'), '/var/lib/rancher/k3s/agent/etc/cni/net.d', name);
    t.is(installer.env.find((e: any) => e.name === 'CNI_NET_DIR').value, '/var/lib/rancher/k3s/agent/etc/cni/net.d', name);
    // install-cni writes through its own mount of the host's directory, wherever that is.
    t.deepEqual(installer.volumeMounts.map((m: any) => m.mountPath).slice(0, 2), ['/host/opt/cni/bin', '/host/etc/cni/net.d']);
  }
});

test('the conflist template on each datastore is JSON once install-cni substitutes it', (t) => {
  for (const [name, datastore] of [
    ['netplug.yaml', 'kubernetes'],
    ['netplug-etcd.yaml', 'etcdv3'],
  ]) {
    const template = docs(name as string).find((doc) => doc.kind === 'ConfigMap')?.data?.['cni_network_config'] ?? '';
    const conflist = JSON.parse(template.replaceAll('__CNI_MTU__', '0').replaceAll(/__[A-Z_]+__/g, 'x'));
    t.is(conflist.plugins[0].type, 'netplug');
    t.is(conflist.plugins[0].datastore_type, datastore);
    t.is(conflist.plugins[1].type, 'portmap');
  }
});

test('crds.yaml holds every CRD of deploy/crds', (t) => {
  const crds = docs('crds.yaml');
  t.true(crds.length >= 6);
  // netplug's own kinds in crd.projectnet.org; the network policy resources users write in projectnet.org (v3).
  t.true(
    crds.every(
      (doc) =>
        doc.kind === 'CustomResourceDefinition' &&
        ['crd.projectnet.org', 'projectnet.org'].includes(doc.spec.group) &&
        doc.metadata.name === `${doc.spec.names.plural}.${doc.spec.group}`,
    ),
  );
  t.deepEqual(
    crds
      .filter((doc) => doc.spec.group === 'projectnet.org')
      .map((doc) => `${doc.spec.names.kind} ${doc.spec.versions.map((v: { name: string }) => v.name)}`),
    ['GlobalNetworkPolicy v3', 'GlobalNetworkSet v3', 'NetworkPolicy v3', 'NetworkSet v3', 'Tier v3'],
  );
});

test("netplug-operator.yaml: probes and Prometheus on the operator's health port, leader election on a Lease its namespace's Role grants", (t) => {
  const objects = JSON.parse(JSON.stringify(docs('netplug-operator.yaml'))) as (Doc & { rules?: any[]; roleRef?: any; subjects?: any[] })[];
  const deployment = objects.find((doc) => doc.kind === 'Deployment' && doc.metadata.name === 'netplug-operator');
  const template = deployment?.spec.template;
  const [container] = template.spec.containers;
  t.like(template.metadata.annotations, { 'prometheus.io/scrape': 'true', 'prometheus.io/port': '9095', 'prometheus.io/path': '/metrics' });
  t.deepEqual(container.ports, [{ name: 'metrics', containerPort: 9095, protocol: 'TCP' }]);
  t.like(container.livenessProbe, { httpGet: { path: '/livez', port: 9095 } });
  t.like(container.readinessProbe, { httpGet: { path: '/readyz', port: 9095 } });
  const env = Object.fromEntries(
    container.env.map((e: { name: string; value?: string; valueFrom?: unknown }) => [e.name, e.value ?? e.valueFrom]),
  );
  t.like(env, {
    NETPLUG_OPERATOR_HEALTH_ADDR: '0.0.0.0:9095',
    OPERATOR_NAMESPACE: { fieldRef: { fieldPath: 'metadata.namespace' } },
    POD_NAME: { fieldRef: { fieldPath: 'metadata.name' } },
  });
  t.false('LEADER_ELECTION' in env, 'leader election on, as by default');
  const clusterRole = objects.find((doc) => doc.kind === 'ClusterRole');
  t.false(
    clusterRole?.rules?.some((rule) => rule.resources.includes('leases')),
    'no Lease anywhere else',
  );
  const role = objects.find((doc) => doc.kind === 'Role');
  t.is(role?.metadata.namespace, 'netplug-operator');
  t.deepEqual(role?.rules, [
    { apiGroups: ['coordination.k8s.io'], resources: ['leases'], verbs: ['create'] },
    { apiGroups: ['coordination.k8s.io'], resources: ['leases'], verbs: ['get', 'update'], resourceNames: ['netplug-operator'] },
  ]);
  const binding = objects.find((doc) => doc.kind === 'RoleBinding');
  t.like(binding, {
    metadata: { name: 'netplug-operator', namespace: 'netplug-operator' },
    roleRef: { kind: 'Role', name: 'netplug-operator' },
  });
  t.deepEqual(binding?.subjects, [{ kind: 'ServiceAccount', name: 'netplug-operator', namespace: 'netplug-operator' }]);
});
