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
  // install-cni is checked until its install is complete, not for the pod's life (an exec every few seconds on every node).
  const installer = pod.containers[1];
  t.like(installer.startupProbe, { exec: { command: ['/usr/bin/netplug-install', '--check'] }, periodSeconds: 1 });
  t.is(installer.readinessProbe, undefined);
});

test('the fast path is on by default (netplug-config fast_path), the agent sees the host paths as the plugin does, and Prometheus finds /metrics', (t) => {
  for (const name of ['netplug.yaml', 'netplug-etcd.yaml', 'netplug-host-local.yaml', 'netplug-policy-only.yaml']) {
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
    // Each mount at its host path: the plugin's calls name host paths (etcd's TLS files and the flow-log token are no host's).
    const hostPaths = new Map(template.spec.volumes.map((v: any) => [v.name, v.hostPath?.path]));
    for (const mount of agent.volumeMounts.filter((m: { name: string }) => !['etcd-certs', 'flows-token'].includes(m.name)))
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
  for (const name of ['netplug.yaml', 'netplug-host-local.yaml', 'netplug-policy-only.yaml', 'netplug-etcd.yaml']) {
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

test("flow logs: off as shipped (netplug-config flow_logs, flow_logs_interval); netplug-node reaches netplug-flows' Service by its cluster IP with a token for it", (t) => {
  const flows = JSON.parse(JSON.stringify(docs('netplug-flows.yaml')));
  const service = flows.find((doc: Doc) => doc.kind === 'Service');
  for (const name of ['netplug.yaml', 'netplug-etcd.yaml', 'netplug-host-local.yaml', 'netplug-policy-only.yaml']) {
    const config = docs(name).find((doc) => doc.kind === 'ConfigMap' && doc.metadata.name === 'netplug-config');
    t.is(config?.data?.['flow_logs'], 'false', name);
    t.is(config?.data?.['flow_logs_interval'], '15', name);
    const daemonSet = JSON.parse(JSON.stringify(docs(name).find((doc) => doc.kind === 'DaemonSet')));
    const pod = daemonSet.spec.template.spec;
    const [agent, installer] = pod.containers;
    const env = (variable: string) => agent.env.find((e: { name: string }) => e.name === variable);
    // Optional keys: a netplug-config from before this release still starts the agent (flow logs off).
    t.deepEqual(
      env('NETPLUG_FLOW_LOGS')?.valueFrom,
      { configMapKeyRef: { key: 'flow_logs', name: 'netplug-config', optional: true } },
      name,
    );
    t.deepEqual(
      env('NETPLUG_FLOW_LOGS_INTERVAL')?.valueFrom,
      { configMapKeyRef: { key: 'flow_logs_interval', name: 'netplug-config', optional: true } },
      name,
    );
    // The host network keeps the host's resolver (no ClusterFirstWithHostNet: the agent must resolve
    // without cluster DNS), so the aggregator is the Service's cluster IP, which the kubelet gives
    // the pods of its namespace as <NAME>_SERVICE_HOST and expands in the value.
    t.true(pod.hostNetwork);
    t.is(pod.dnsPolicy, undefined, name);
    t.is(service.metadata.namespace, daemonSet.metadata.namespace);
    const serviceHost = `${service.metadata.name.toUpperCase().replaceAll('-', '_')}_SERVICE_HOST`;
    const aggregator = env('NETPLUG_FLOW_LOGS_AGGREGATOR')?.value;
    t.is(aggregator, `http://$(${serviceHost}):${service.spec.ports[0].port}`, name);
    // A URL netplug-node takes whether the kubelet expanded it (the Service there first, IPv4) or not.
    t.deepEqual(service.spec.ipFamilies, ['IPv4']);
    t.true(URL.canParse(aggregator.replace(`$(${serviceHost})`, '10.96.12.34')));
    t.true(URL.canParse(aggregator));
    // The token file: a projected service account token for netplug-flows, mounted read-only into the agent only.
    const tokenFile = env('NETPLUG_FLOW_LOGS_TOKEN_FILE')?.value;
    const mount = agent.volumeMounts.find((m: { mountPath: string }) => tokenFile.startsWith(`${m.mountPath}/`));
    t.true(mount?.readOnly, name);
    const volume = pod.volumes.find((v: { name: string }) => v.name === mount?.name);
    t.deepEqual(
      volume?.projected?.sources,
      [{ serviceAccountToken: { audience: 'netplug-flows', expirationSeconds: 3600, path: tokenFile.slice(mount.mountPath.length + 1) } }],
      name,
    );
    t.false(
      installer.volumeMounts.some((m: { name: string }) => m.name === mount.name),
      'install-cni has no flow-log token',
    );
  }
});

test('netplug-flows.yaml: the aggregator for netplug-node, allowed token reviews only, its Service on the write port only', (t) => {
  const objects = JSON.parse(JSON.stringify(docs('netplug-flows.yaml'))) as (Doc & { rules?: any[]; roleRef?: any; subjects?: any[] })[];
  t.deepEqual(
    objects.map((doc) => `${doc.kind} ${doc.metadata.name}`),
    [
      'ServiceAccount netplug-flows',
      'ClusterRole netplug-flows',
      'ClusterRoleBinding netplug-flows',
      'Service netplug-flows',
      'Deployment netplug-flows',
    ],
  );
  t.true(objects.every((doc) => doc.metadata.namespace === undefined || doc.metadata.namespace === 'kube-system'));
  // Least privilege: it reviews its writers' tokens, and reads nothing.
  t.deepEqual(objects.find((doc) => doc.kind === 'ClusterRole')?.rules, [
    { apiGroups: ['authentication.k8s.io'], resources: ['tokenreviews'], verbs: ['create'] },
  ]);
  const binding = objects.find((doc) => doc.kind === 'ClusterRoleBinding');
  t.deepEqual(binding?.roleRef, { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'netplug-flows' });
  t.deepEqual(binding?.subjects, [{ kind: 'ServiceAccount', name: 'netplug-flows', namespace: 'kube-system' }]);

  const deployment = objects.find((doc) => doc.kind === 'Deployment');
  t.is(deployment?.spec.replicas, 1);
  const template = deployment?.spec.template;
  // netplugctl flows finds the pod by this label.
  t.deepEqual(template.metadata.labels, { 'k8s-app': 'netplug-flows' });
  t.deepEqual(deployment?.spec.selector.matchLabels, { 'k8s-app': 'netplug-flows' });
  t.is(template.spec.serviceAccountName, 'netplug-flows');
  t.falsy(template.spec.hostNetwork);
  const [container, ...others] = template.spec.containers;
  t.is(others.length, 0);
  t.is(container.image, RELEASE_IMAGE);
  t.is(container.imagePullPolicy, 'IfNotPresent');
  t.deepEqual(container.command, ['/usr/bin/netplug-flows']);
  const env = Object.fromEntries(container.env.map((e: { name: string; value: string }) => [e.name, e.value]));
  t.deepEqual(env, {
    NETPLUG_FLOWS_LISTEN: ':9445',
    NETPLUG_FLOWS_READ_LISTEN: '127.0.0.1:9446',
    NETPLUG_FLOWS_HEALTH_ADDR: '0.0.0.0:9447',
    NETPLUG_FLOWS_WRITERS: 'kube-system:netplug-node',
    NETPLUG_FLOWS_READERS: 'kube-system:netplug-flow-viewer',
    NETPLUG_FLOWS_RETENTION: '2h',
    NETPLUG_FLOWS_MAX_BYTES: '64Mi',
  });
  // The writer is the service account every manifest's node pods run as.
  for (const name of ['netplug.yaml', 'netplug-etcd.yaml', 'netplug-host-local.yaml', 'netplug-policy-only.yaml']) {
    const daemonSet = docs(name).find((doc) => doc.kind === 'DaemonSet');
    t.is(env['NETPLUG_FLOWS_WRITERS'], `${daemonSet?.metadata.namespace}:${daemonSet?.spec.template.spec.serviceAccountName}`, name);
  }
  t.like(container.livenessProbe, { httpGet: { path: '/livez', port: 9447 } });
  t.like(container.readinessProbe, { httpGet: { path: '/readyz', port: 9447 } });
  t.like(template.metadata.annotations, { 'prometheus.io/scrape': 'true', 'prometheus.io/port': '9447', 'prometheus.io/path': '/metrics' });
  t.truthy(container.resources.requests.cpu && container.resources.requests.memory);
  // The read port is on the loopback: neither a container port nor the Service's.
  t.deepEqual(container.ports, [
    { name: 'write', containerPort: 9445, protocol: 'TCP' },
    { name: 'metrics', containerPort: 9447, protocol: 'TCP' },
  ]);
  const service = objects.find((doc) => doc.kind === 'Service');
  t.deepEqual(service?.spec.selector, template.metadata.labels);
  t.deepEqual(service?.spec.ports, [{ name: 'write', port: 9445, targetPort: 'write', protocol: 'TCP' }]);
  t.is(service?.spec.type ?? 'ClusterIP', 'ClusterIP');
});

test("one edit per CNI directory: its hostPath, anchored, moves the agent's mount and install-cni's CNI_NET_DIR with it", (t) => {
  for (const name of ['netplug.yaml', 'netplug-etcd.yaml', 'netplug-host-local.yaml', 'netplug-policy-only.yaml']) {
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
