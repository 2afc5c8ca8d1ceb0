// host-local with the node's pod CIDRs, against a real kube-apiserver and Debian's host-local:
// usePodCidr and usePodCidrIPv6 in `subnet` and in `ranges`, dual stack, the route rules (defaults
// per family, custom routes with their gateways ignored, include_default_routes), and the errors:
// outside Kubernetes mode, a node without the family's CIDR, an identity that may not read nodes.
import test, { type ExecutionContext } from 'ava';

import { hostLocalNetconf, invoke, reservations, tempDir } from '../helpers/cni.ts';
import { addressesOf } from '../helpers/ipam.ts';
import { addresses, containerId, createNetns, link, routes } from '../helpers/kernel.ts';
import { createPod, podArgs, startKube, type Kube } from '../helpers/kube.ts';
import { sharedTeardowns } from '../helpers/shared.ts';

let kube: Kube;
/** An identity allowed exactly what usePodCidr needs: get on nodes. */
let nodesOnly: { kubeconfig: string };
/** host-local's state directory per node, as each node has one. */
const dataDirs = new Map<string, string>();
const shared = sharedTeardowns(test);

test.before(async () => {
  kube = await startKube(shared);
  nodesOnly = await kube.identityWith('netplug-nodes', [{ apiGroups: [''], resources: ['nodes'], verbs: ['get'] }]);
  // A node per test, so that each test's reservations are its own.
  await createNode('node-v4', ['10.140.3.0/24']);
  await createNode('node-v6', ['fd40:0:0:3::/64']);
  await createNode('node-dual', ['10.141.7.0/24', 'fd41:0:0:7::/64']);
  await createNode('node-routes', ['10.142.1.0/24']);
  await createNode('node-k8s', ['10.143.1.0/24']);
  await createNode('node-errors', ['10.144.1.0/24']);
});

async function createNode(name: string, podCIDRs: string[]) {
  await kube.core.createNode({ body: { metadata: { name }, spec: { podCIDR: podCIDRs[0], podCIDRs } } });
  dataDirs.set(name, tempDir(shared, `hl-${name}`));
}

/** A host-local netconf on `node`, read with the nodes-only identity unless told otherwise. */
function netconf(
  t: ExecutionContext,
  node: string,
  ipam: { subnet?: string; ranges?: unknown; routes?: unknown },
  extra: Record<string, unknown> = {},
) {
  const conf = hostLocalNetconf({
    version: '1.0.0',
    dataDir: dataDirs.get(node) ?? tempDir(t, 'hl'),
    ...ipam,
    extra: { kubernetes: { kubeconfig: nodesOnly.kubeconfig, node_name: node }, ...extra },
  });
  if (ipam.subnet) {
    const section = conf['ipam'] as Record<string, unknown>;
    delete section['ranges'];
    section['subnet'] = ipam.subnet;
  }
  return conf;
}

/** ADD for a new pod; its DEL at teardown. */
async function addPod(t: ExecutionContext, conf: Record<string, unknown>) {
  const pod = await createPod(kube);
  const id = containerId();
  const netns = createNetns(t, 'hl');
  const add = invoke({ command: 'ADD', containerId: id, netns: netns.path, netconf: conf, args: podArgs(pod, id) });
  const del = () => invoke({ command: 'DEL', containerId: id, netns: netns.path, netconf: conf, args: podArgs(pod, id) });
  t.teardown(() => void del());
  return { add, netns, del, pod, id };
}

const dataDirOf = (conf: Record<string, unknown>) => (conf['ipam'] as { dataDir: string }).dataDir;

test("usePodCidr in subnet: an address of the node's IPv4 pod CIDR, the default route via the link-local next hop", async (t) => {
  const conf = netconf(t, 'node-v4', { subnet: 'usePodCidr' });
  const { add, netns, del } = await addPod(t, conf);
  t.is(add.status, 0, add.stdout);
  const [address] = addressesOf(add.json);
  t.regex(address ?? '', /^10\.140\.3\.\d+$/);
  t.deepEqual(
    addresses('eth0', netns).filter((a) => !a.startsWith('fe80:')),
    [`${address}/32`],
  );
  t.deepEqual(routes(4, netns), ['default via 169.254.1.1 dev eth0', '169.254.1.1 dev eth0 scope link']);
  t.false(JSON.stringify(add.json.ips).includes('gateway'), "host-local's gateway is not in the result");
  t.deepEqual(reservations(dataDirOf(conf)), [address]);
  t.is(del().status, 0);
  t.deepEqual(reservations(dataDirOf(conf)), [], 'DEL releases without asking the API server');
});

test('usePodCidrIPv6 (any letter case) in ranges: an address of the IPv6 pod CIDR, the IPv6 default route via fe80::ecee:eeff:feee:eeee', async (t) => {
  const conf = netconf(t, 'node-v6', { ranges: [[{ subnet: 'usepodcidripv6' }]] });
  const { add, netns } = await addPod(t, conf);
  t.is(add.status, 0, add.stdout);
  const [address] = addressesOf(add.json);
  t.regex(address ?? '', /^fd40:0:0:3::/);
  t.true(addresses('eth0', netns).includes(`${address}/128`));
  t.true(routes(6, netns).includes('default via fe80::ecee:eeff:feee:eeee dev eth0'), routes(6, netns).join('\n'));
});

test('dual stack: one range set per family, both addresses, both default routes', async (t) => {
  const conf = netconf(t, 'node-dual', { ranges: [[{ subnet: 'usePodCidr' }], [{ subnet: 'usePodCidrIPv6' }]] });
  const { add, netns, del } = await addPod(t, conf);
  t.is(add.status, 0, add.stdout);
  const [v4, v6] = addressesOf(add.json);
  t.regex(v4 ?? '', /^10\.141\.7\./);
  t.regex(v6 ?? '', /^fd41:0:0:7::/);
  t.true(routes(4, netns).includes('default via 169.254.1.1 dev eth0'));
  t.true(routes(6, netns).includes('default via fe80::ecee:eeff:feee:eeee dev eth0'));
  t.is(reservations(dataDirOf(conf)).length, 2);
  t.is(del().status, 0);
  t.deepEqual(reservations(dataDirOf(conf)), []);
});

test('custom routes replace the defaults, their gw ignored; include_default_routes keeps the defaults too', async (t) => {
  const custom = [{ dst: '10.200.0.0/16', gw: '10.140.3.1' }, { dst: '192.0.2.0/24' }];
  const only = await addPod(t, netconf(t, 'node-routes', { subnet: 'usePodCidr', routes: custom }));
  t.is(only.add.status, 0, only.add.stdout);
  t.deepEqual(
    routes(4, only.netns).sort(),
    ['10.200.0.0/16 via 169.254.1.1 dev eth0', '169.254.1.1 dev eth0 scope link', '192.0.2.0/24 via 169.254.1.1 dev eth0'].sort(),
  );
  t.deepEqual(only.add.json.routes.map((r: { dst: string; gw: string }) => `${r.dst} ${r.gw}`).sort(), [
    '10.200.0.0/16 169.254.1.1',
    '192.0.2.0/24 169.254.1.1',
  ]);

  const both = await addPod(t, netconf(t, 'node-routes', { subnet: 'usePodCidr', routes: custom }, { include_default_routes: true }));
  t.is(both.add.status, 0, both.add.stdout);
  t.true(routes(4, both.netns).includes('default via 169.254.1.1 dev eth0'));
  t.true(routes(4, both.netns).includes('10.200.0.0/16 via 169.254.1.1 dev eth0'));
});

test('the plugin identity with policy.type k8s reads both pod and node', async (t) => {
  const conf = netconf(
    t,
    'node-k8s',
    { subnet: 'usePodCidr' },
    { kubernetes: { kubeconfig: kube.server.plugin.kubeconfig, node_name: 'node-k8s' }, policy: { type: 'k8s' } },
  );
  const { add } = await addPod(t, conf);
  t.is(add.status, 0, add.stdout);
  t.regex(addressesOf(add.json)[0] ?? '', /^10\.143\.1\./);
});

test('errors: each clear, with nothing reserved and no interface left', async (t) => {
  const cases: Array<[string, Record<string, unknown>, number, RegExp]> = [
    [
      'node without an IPv6 pod CIDR',
      netconf(t, 'node-errors', { ranges: [[{ subnet: 'usePodCidr' }], [{ subnet: 'usePodCidrIPv6' }]] }),
      7,
      /netconf uses usePodCidrIPv6, but node node-errors has no IPv6 pod CIDR \(its spec\.podCIDRs: 10\.144\.1\.0\/24\)/,
    ],
    [
      'node that does not exist',
      netconf(t, 'node-gone', { subnet: 'usePodCidr' }),
      7,
      /netconf field "kubernetes\.node_name": node node-gone does not exist in the Kubernetes API at https:\/\/127\.0\.0\.1:\d+; set it to this node's Node object name/,
    ],
    [
      'identity that may not read nodes',
      netconf(
        t,
        'node-errors',
        { subnet: 'usePodCidr' },
        { kubernetes: { kubeconfig: kube.server.identity('netplug-nobody').kubeconfig, node_name: 'node-errors' } },
      ),
      100,
      /nodes "node-errors" is forbidden: User "netplug-nobody" cannot get resource "nodes".*; netplug needs get on nodes \(for usePodCidr and usePodCidrIPv6\)/,
    ],
  ];
  for (const [what, conf, code, message] of cases) {
    const { add, netns } = await addPod(t, conf);
    t.is(add.json?.code, code, `${what}: ${add.stdout}`);
    t.regex(add.json?.msg ?? '', message, what);
    t.deepEqual(reservations(dataDirOf(conf)), [], what);
    t.is(link('eth0', netns), undefined, what);
  }
});

test('usePodCidr outside Kubernetes mode, or in rangeStart, is a configuration error', async (t) => {
  const conf = netconf(t, 'node-v4', { subnet: 'usePodCidr' });
  const plain = invoke({ command: 'ADD', containerId: containerId(), netns: createNetns(t, 'hl').path, netconf: conf });
  t.is(plain.json.code, 7, plain.stdout);
  t.regex(plain.json.msg, /usePodCidr or usePodCidrIPv6, which needs Kubernetes mode \(K8S_POD_NAMESPACE and K8S_POD_NAME in CNI_ARGS\)/);

  const inRangeStart = netconf(t, 'node-v4', { ranges: [[{ subnet: 'usePodCidr', rangeStart: 'usePodCidr' }]] });
  const { add } = await addPod(t, inRangeStart);
  t.is(add.json.code, 7, add.stdout);
  t.regex(add.json.msg, /ipam\.ranges\[0\]\[0\]\.rangeStart.*cannot be usePodCidr or usePodCidrIPv6; those are valid only in subnet/);
});
