// The address annotations against a real kube-apiserver and etcd, through the built executable:
// pools from the pod or its namespace, exact addresses with and without the address manager,
// floating IPs, their precedence over the netconf and node selectors, and every rule's error, with
// nothing allocated when one is broken.
import test, { type ExecutionContext } from 'ava';

import { invoke, tempDir } from '../helpers/cni.ts';
import { startEtcd, type EtcdServer } from '../helpers/etcd.ts';
import { addressesOf, ctlOk, etcdValue, ipamNetconf, totalAllocated } from '../helpers/ipam.ts';
import { containerId, createNetns, link } from '../helpers/kernel.ts';
import { createPod, podArgs, startKube, type Kube } from '../helpers/kube.ts';
import { sharedTeardowns } from '../helpers/shared.ts';

let kube: Kube;
let etcd: EtcdServer;
const shared = sharedTeardowns(test);

test.before(async (t) => {
  kube = await startKube(shared);
  etcd = await startEtcd(shared);
  ctlOk(t, etcd, 'pool', 'create', 'general', '--cidr', '10.120.0.0/16', '--node-selector', 'pods == "general"');
  ctlOk(t, etcd, 'pool', 'create', 'blue', '--cidr', '10.121.0.0/16', '--node-selector', 'pods == "blue"');
  ctlOk(t, etcd, 'pool', 'create', 'green', '--cidr', '10.122.0.0/16', '--node-selector', '!all()');
  ctlOk(t, etcd, 'pool', 'create', 'v6', '--cidr', 'fd22::/48');
  ctlOk(t, etcd, 'node', 'create', 'anno-node', '--label', 'pods=general');
});

const netconf = (ipam: Record<string, unknown> = {}, extra: Record<string, unknown> = {}) =>
  ipamNetconf(etcd, {
    node: 'anno-node',
    ipam,
    extra: { kubernetes: { kubeconfig: kube.server.plugin.kubeconfig }, policy: { type: 'k8s' }, ...extra },
  });

/** ADD for a new pod with `annotations` (and its namespace's). */
async function addPod(
  t: ExecutionContext,
  options: { annotations?: Record<string, string>; namespaceAnnotations?: Record<string, string>; conf?: Record<string, unknown> },
) {
  const pod = await createPod(kube, { annotations: options.annotations ?? {}, namespaceAnnotations: options.namespaceAnnotations ?? {} });
  const id = containerId();
  const netns = createNetns(t, 'anno');
  const conf = options.conf ?? netconf();
  const add = invoke({ command: 'ADD', containerId: id, netns: netns.path, netconf: conf, args: podArgs(pod, id) });
  t.teardown(() => void invoke({ command: 'DEL', containerId: id, netns: netns.path, netconf: conf, args: podArgs(pod, id) }));
  return { pod, add, netns, addresses: addressesOf(add.json) };
}

test('with no annotation, the pools whose node selector matches the node', async (t) => {
  const { addresses } = await addPod(t, {});
  t.true(addresses[0]?.startsWith('10.120.'), addresses[0]);
});

test('a pool annotation on the pod wins over the netconf and node selectors', async (t) => {
  const { addresses, add } = await addPod(t, {
    annotations: { 'cni.projectnet.org/ipv4pools': '["green"]' },
    conf: netconf({ ipv4_pools: ['blue'] }),
  });
  t.is(add.status, 0, add.stdout);
  t.true(addresses[0]?.startsWith('10.122.'), addresses[0]);
});

test('ipv6pools picks the IPv6 pool the same way', async (t) => {
  const { add, addresses } = await addPod(t, {
    annotations: { 'cni.projectnet.org/ipv6pools': '["fd22::/48"]' },
    conf: netconf({ assign_ipv4: 'false', assign_ipv6: 'true' }),
  });
  t.is(add.status, 0, add.stdout);
  t.true(addresses.length === 1 && addresses[0]!.startsWith('fd22:'), addresses.join());
});

test("the namespace's pool annotation applies to its pods; the pod's own wins over it", async (t) => {
  const fromNamespace = await addPod(t, { namespaceAnnotations: { 'cni.projectnet.org/ipv4pools': '["10.121.0.0/16"]' } });
  t.true(fromNamespace.addresses[0]?.startsWith('10.121.'), fromNamespace.addresses[0]);
  const pod = await createPod(kube, {
    namespace: fromNamespace.pod.namespace,
    annotations: { 'cni.projectnet.org/ipv4pools': '["green"]' },
  });
  const id = containerId();
  const add = invoke({ command: 'ADD', containerId: id, netns: createNetns(t, 'anno').path, netconf: netconf(), args: podArgs(pod, id) });
  t.true(addressesOf(add.json)[0]?.startsWith('10.122.'), "the pod's annotation over its namespace's");
});

test('the netconf wins over node selectors without annotations', async (t) => {
  const { addresses } = await addPod(t, { conf: netconf({ ipv4_pools: ['blue'] }) });
  t.true(addresses[0]?.startsWith('10.121.'), addresses[0]);
});

test('ipAddrs gets exactly those addresses, and wins over a pool annotation', async (t) => {
  const { add, addresses } = await addPod(t, {
    annotations: { 'cni.projectnet.org/ipAddrs': '["10.121.77.7", "fd22::77"]', 'cni.projectnet.org/ipv4pools': '["green"]' },
    conf: netconf({ assign_ipv6: 'true' }),
  });
  t.is(add.status, 0, add.stdout);
  t.deepEqual(addresses, ['10.121.77.7', 'fd22::77']);
});

test('ipAddrs: a new sandbox of the pod takes its fixed address over', async (t) => {
  const pod = await createPod(kube, { annotations: { 'cni.projectnet.org/ipAddrs': '["10.120.88.8"]' } });
  const [first, second] = [containerId(), containerId()];
  const conf = netconf();
  t.deepEqual(
    addressesOf(
      invoke({ command: 'ADD', containerId: first, netns: createNetns(t, 'fix').path, netconf: conf, args: podArgs(pod, first) }).json,
    ),
    ['10.120.88.8'],
  );
  const again = invoke({
    command: 'ADD',
    containerId: second,
    netns: createNetns(t, 'fix').path,
    netconf: conf,
    args: podArgs(pod, second),
  });
  t.is(again.status, 0, again.stdout);
  t.deepEqual(addressesOf(again.json), ['10.120.88.8']);
  const shown = ctlOk(t, etcd, 'ipam', 'show', '--ip', '10.120.88.8', '-o', 'json').json;
  t.is(shown.handle, `${conf.name}.${second}`);
});

test.serial('ipAddrsNoIpam assigns without the address manager, only with its feature flag', async (t) => {
  const before = totalAllocated(t, etcd);
  const refused = await addPod(t, { annotations: { 'cni.projectnet.org/ipAddrsNoIpam': '["192.0.2.44"]' } });
  t.is(refused.add.json.code, 7);
  t.regex(
    refused.add.json.msg,
    /annotation "cni\.projectnet\.org\/ipAddrsNoIpam" "\[\\"192\.0\.2\.44\\"\]" on pod .*: needs netconf field "feature_control\.ip_addrs_no_ipam" set to true/,
  );
  const { add, addresses } = await addPod(t, {
    annotations: { 'cni.projectnet.org/ipAddrsNoIpam': '["192.0.2.44"]' },
    conf: netconf({}, { feature_control: { ip_addrs_no_ipam: true } }),
  });
  t.is(add.status, 0, add.stdout);
  t.deepEqual(addresses, ['192.0.2.44']);
  t.is(totalAllocated(t, etcd), before, 'nothing allocated');
});

test('floatingIPs go into the workload endpoint as NATs, only with their feature flag', async (t) => {
  const refused = await addPod(t, { annotations: { 'cni.projectnet.org/floatingIPs': '["198.51.100.9"]' } });
  t.regex(refused.add.json.msg, /needs netconf field "feature_control\.floating_ips" set to true/);
  const { add, pod, addresses } = await addPod(t, {
    annotations: { 'cni.projectnet.org/floatingIPs': '["198.51.100.9"]' },
    conf: netconf({}, { feature_control: { floating_ips: true } }),
  });
  t.is(add.status, 0, add.stdout);
  const key = `/netplug/resources/v3/projectnet.org/workloadendpoints/${pod.namespace}/anno--node-k8s-${pod.name.replaceAll('-', '--')}-eth0`;
  t.deepEqual((await etcdValue(t, etcd, key)).spec.ipNATs, [{ internalIP: addresses[0], externalIP: '198.51.100.9' }]);
});

test.serial('every broken rule is an error naming the annotation and value, with nothing allocated', async (t) => {
  const before = totalAllocated(t, etcd);
  const cases: Array<[Record<string, string>, RegExp, Record<string, unknown>?]> = [
    [
      { 'cni.projectnet.org/ipAddrs': '["10.120.1.1"]', 'cni.projectnet.org/ipAddrsNoIpam': '["10.120.1.2"]' },
      /annotations "cni\.projectnet\.org\/ipAddrs" and "cni\.projectnet\.org\/ipAddrsNoIpam" on pod .* cannot be used together/,
    ],
    [
      { 'cni.projectnet.org/ipAddrs': '["10.120.1.1", "10.120.1.2"]' },
      /annotation "cni\.projectnet\.org\/ipAddrs" .*: more than one IPv4 address; at most one IPv4 and one IPv6/,
    ],
    [{ 'cni.projectnet.org/ipAddrs': '["fd22::1", "fd22::2"]' }, /more than one IPv6 address/],
    [
      { 'cni.projectnet.org/ipAddrs': '10.120.1.1' },
      /annotation "cni\.projectnet\.org\/ipAddrs" "10\.120\.1\.1" on pod .*: not JSON .*; write a JSON array of strings/,
    ],
    [{ 'cni.projectnet.org/ipAddrs': '["ten"]' }, /"ten" is not an IP address/],
    [{ 'cni.projectnet.org/ipAddrs': '[]' }, /lists no address/],
    [
      { 'cni.projectnet.org/ipAddrs': '["192.0.2.1"]' },
      /annotation "cni\.projectnet\.org\/ipAddrs": the requested address 192\.0\.2\.1 is not in any enabled pool/,
    ],
    [{ 'cni.projectnet.org/ipv4pools': '["purple"]' }, /annotation "cni\.projectnet\.org\/ipv4pools": pool "purple" does not exist/],
    [
      { 'cni.projectnet.org/ipv4pools': '["10.121.3.0/24"]' },
      /10\.121\.3\.0\/24 lies within pool "blue" \(10\.121\.0\.0\/16\); name a pool, or its exact CIDR/,
    ],
    [{ 'cni.projectnet.org/ipv4pools': '{"pool": "blue"}' }, /must be a JSON array of strings/],
    [{ 'cni.projectnet.org/ipv6pools': '[""]' }, /annotation "cni\.projectnet\.org\/ipv6pools" .*: holds an empty string/],
    [{ 'cni.projectnet.org/ipv4pools': '["v6"]' }, /pool "v6" \(fd22::\/48\) is IPv6, not IPv4/],
  ];
  for (const [annotations, message] of cases) {
    const { add, netns } = await addPod(t, { annotations });
    t.is(add.json?.code, 7, `${JSON.stringify(annotations)}: ${add.stdout}`);
    t.regex(add.json?.msg ?? '', message);
    t.is(link('eth0', netns), undefined);
  }
  t.is(totalAllocated(t, etcd), before, 'nothing allocated by any of them');
});

test('host-local cannot honour a specific address or pool: a clear error', async (t) => {
  const hostLocal = { ...netconf(), ipam: { type: 'host-local', subnet: '10.130.0.0/24', dataDir: tempDir(t, 'anno-hl') } };
  const pools = await addPod(t, { annotations: { 'cni.projectnet.org/ipv4pools': '["blue"]' }, conf: hostLocal });
  t.is(pools.add.json.code, 7);
  t.regex(pools.add.json.msg, /choosing pools needs ipam\.type "netplug-ipam", not "host-local"/);
  const address = await addPod(t, { annotations: { 'cni.projectnet.org/ipAddrs': '["10.130.0.9"]' }, conf: hostLocal });
  t.regex(address.add.json.msg, /a specific address needs ipam\.type "netplug-ipam", not "host-local"/);
});
