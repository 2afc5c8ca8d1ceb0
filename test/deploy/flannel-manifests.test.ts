// The flannel variant's manifests (ts/render/flannel.ts): the policy-only install's netplug, with
// flanneld beside it in the node pod, on both datastores. test/e2e/policy-only.test.ts installs the
// Kubernetes datastore's under a real kubelet; these check what differs between the two and what
// a cluster operator edits.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

import { loadAllYaml } from '@kubernetes/client-node';
import test from 'ava';

import { FLANNEL_IMAGE, FLANNEL_VERSION } from '../../ts/render/flannel.ts';
import { RELEASE_IMAGE } from '../../ts/render/release.ts';

const ROOT = new URL('../../', import.meta.url).pathname;
type Doc = { kind: string; metadata: { name: string }; spec?: any; data?: Record<string, string>; rules?: unknown[] };
const docs = (name: string) => JSON.parse(JSON.stringify(loadAllYaml(readFileSync(join(ROOT, 'deploy/manifests', name), 'utf8')))) as Doc[];
const VARIANTS = ['netplug-flannel.yaml', 'netplug-flannel-etcd.yaml'];

test('the image is the flannel release scripts/flannel/go.mod pins, never pulled', (t) => {
  const goMod = readFileSync(join(ROOT, 'scripts/flannel/go.mod'), 'utf8');
  t.regex(goMod, new RegExp(`^require github\\.com/flannel-io/flannel ${FLANNEL_VERSION.replaceAll('.', '\\.')}$`, 'm'));
  t.is(FLANNEL_IMAGE, `localhost/netplug-flannel:${FLANNEL_VERSION}`);
  for (const name of VARIANTS) {
    const pod = docs(name).find((doc) => doc.kind === 'DaemonSet')?.spec.template.spec;
    t.deepEqual(
      pod.containers.map((container: { name: string; image: string; imagePullPolicy: string }) => [
        container.name,
        container.image,
        container.imagePullPolicy,
      ]),
      [
        ['netplug-node', RELEASE_IMAGE, 'IfNotPresent'],
        ['install-cni', RELEASE_IMAGE, 'IfNotPresent'],
        ['flannel', FLANNEL_IMAGE, 'IfNotPresent'],
      ],
      name,
    );
  }
});

test("netplug as in the policy-only install: host-local in the node's pod CIDR, no routes of its own; pods' MTU leaves VXLAN's 50 bytes", (t) => {
  for (const name of VARIANTS) {
    const all = docs(name);
    const config = all.find((doc) => doc.kind === 'ConfigMap' && doc.metadata.name === 'netplug-config');
    t.is(config?.data?.['veth_mtu'], '1450', name);
    t.regex(config?.data?.['cni_network_config'] ?? '', /"ipam": \{"type": "host-local", "subnet": "usePodCidr"\}/, name);
    const agent = all.find((doc) => doc.kind === 'DaemonSet')?.spec.template.spec.containers[0];
    const value = (variable: string) => agent.env.find((e: { name: string }) => e.name === variable)?.value;
    t.is(value('NETPLUG_NETWORKING_BACKEND'), 'none', name);
    t.is(value('USE_POD_CIDR'), 'true', name);
    t.is(value('DATASTORE_TYPE'), name.endsWith('-etcd.yaml') ? 'etcdv3' : 'kubernetes', name);
  }
});

test("flanneld: VXLAN over the nodes' pod CIDRs from the Kubernetes API, its settings from netplug-config, its subnet file on the host, the rights it uses", (t) => {
  for (const name of VARIANTS) {
    const all = docs(name);
    const config = all.find((doc) => doc.kind === 'ConfigMap' && doc.metadata.name === 'netplug-config');
    t.deepEqual(JSON.parse(config?.data?.['flannel_net_conf'] ?? ''), { Network: '10.244.0.0/16', Backend: { Type: 'vxlan' } });
    t.is(config?.data?.['flannel_masquerade'], 'true');
    t.is(config?.data?.['flannel_iface'], '');
    const pod = all.find((doc) => doc.kind === 'DaemonSet')?.spec.template.spec;
    const flannel = pod.containers[2];
    t.true(flannel.command.includes('--kube-subnet-mgr'), name);
    t.deepEqual(
      flannel.env
        .filter((e: { valueFrom?: { configMapKeyRef?: unknown } }) => e.valueFrom?.configMapKeyRef)
        .map((e: { name: string }) => e.name),
      ['FLANNELD_IFACE', 'FLANNELD_IP_MASQ'],
    );
    const volume = (volumeName: string) => pod.volumes.find((v: { name: string }) => v.name === volumeName);
    t.deepEqual(volume('flannel-run').hostPath, { path: '/run/flannel', type: 'DirectoryOrCreate' });
    t.deepEqual(volume('flannel-cfg').configMap, { name: 'netplug-config', items: [{ key: 'flannel_net_conf', path: 'net-conf.json' }] });
    t.deepEqual(
      flannel.volumeMounts.map((m: { mountPath: string }) => m.mountPath),
      ['/run/flannel', '/etc/kube-flannel'],
    );
    t.is(flannel.readinessProbe.httpGet.path, '/readyz');
    const binding = all.find((doc) => doc.kind === 'ClusterRoleBinding' && doc.metadata.name === 'netplug-node-flannel') as any;
    t.deepEqual(binding?.subjects, [{ kind: 'ServiceAccount', name: 'netplug-node', namespace: 'kube-system' }]);
    const role = all.find((doc) => doc.kind === 'ClusterRole' && doc.metadata.name === 'netplug-node-flannel');
    t.deepEqual(role?.rules, [
      { apiGroups: [''], resources: ['pods'], verbs: ['get'] },
      { apiGroups: [''], resources: ['nodes'], verbs: ['get', 'list', 'watch'] },
      { apiGroups: [''], resources: ['nodes/status'], verbs: ['patch'] },
    ]);
  }
});
