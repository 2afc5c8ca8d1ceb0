// netplug on a dual-stack three-node cluster (scripts/lib/cluster.ts, dualStack): IPv4 and IPv6
// pod and service CIDRs, each node on an IPv4 and an IPv6 underlay, node 1 (the control plane's)
// and node 2 on subnet A (10.250.0.0/24, fd00:250:0::/64), node 3 on subnet B (10.250.1.0/24,
// fd00:250:1::/64) behind a router that knows no pod address. netplug is installed from
// deploy/manifests/netplug.yaml edited as docs/install.md's "Dual-stack" says: IP6=autodetect,
// NETPLUG_IPV6POOL_CIDR (VXLAN CrossSubnet, natOutgoing) on netplug-node, assign_ipv6 in the
// conflist's ipam. With real packets: every pod gets an address of each family and the MTU of VXLAN
// over IPv6; node 2's blocks are routed directly via its address of each family, node 3's over
// vxlan6.netplug and vxlan.netplug; pods reach each other over both families across nodes, a
// dual-stack Service over its IPv6 ClusterIP, 4 MiB cross the subnets over IPv6 whole, nodes reach
// pods over IPv6, a pod reaches the router (outside the pools) masqueraded; the IPv4 pool switched to
// VXLAN Always carries node 2's pods through vxlan.netplug; deleting the pods gives their addresses
// back. This is also the three-node test of the Kubernetes datastore (multi-node-etcd.test.ts has
// IPv4 alone on etcd): one cluster for both saves npm test a cluster's start, install and stop.
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';

import test, { type ExecutionContext } from 'ava';

import { contains, parseIp, parsePrefix } from '../../ts/net/cidr.ts';
import { NODE_ADDRESS_ANNOTATIONS } from '../../ts/store/kubernetes/resources.ts';
import { CLUSTER_CIDR6 } from '../../scripts/lib/cluster.ts';
import { apply, CLUSTER_CIDR, clusterPerFile, getJson, type ClusterNode } from '../helpers/cluster.ts';
import { eventually, imageArchive, manifestFor, NETPLUGCTL, nodePaths, writeKubeadmConfig } from './install.ts';
import { startPinnedWebPods } from './pinned-pods.ts';

const run = promisify(execFile);
const ROOT = new URL('../../', import.meta.url).pathname;
/** The router's IPv6 address on subnet A (scripts/lib/cluster-network.ts): outside every pool. */
const ROUTER6_A = 'fd00:250:0::fe';

interface DualStackPod {
  name: string;
  node: ClusterNode;
  ip4: string;
  ip6: string;
}

const cluster = clusterPerFile(test, { nodes: 3, dualStack: true, systemPlugins: false });
const pods: DualStackPod[] = [];
const pod = (index: number) => {
  const found = pods[index - 1];
  if (!found) throw new Error(`pod-${index} was not made (see the test that makes them)`);
  return found;
};
const exec = (from: DualStackPod, ...command: string[]) => cluster().kubectl('exec', from.name, '--', ...command);
const netplugctl = async (...args: string[]) => (await run(NETPLUGCTL, ['--kubeconfig', cluster().kubeconfig, ...args])).stdout;
const url = (ip: string, path: string, port = 8080) => `http://${ip.includes(':') ? `[${ip}]` : ip}:${port}${path}`;
/** `node`'s netplug route (proto 80) whose destination holds the IPv4 address `ip`. */
const ipv4RouteTo = async (node: ClusterNode, ip: string) => {
  const routes = JSON.parse(await node.inNode('ip', ['-j', '-4', 'route', 'show', 'proto', '80'])) as any[];
  const address = parseIp(ip)!.value;
  return routes.find(
    (route) => route.dst !== 'default' && contains(parsePrefix(route.dst.includes('/') ? route.dst : `${route.dst}/32`)!, 4, address),
  );
};
/** What `from` gets of `address`'s /hello (its pod name), retried while routes settle; how long that took is logged when it was not at once. */
const fetchFrom = async (t: ExecutionContext, from: DualStackPod, address: string, port?: number) => {
  const started = Date.now();
  const body = await eventually(
    `${from.name} → ${address}`,
    async () => (await exec(from, 'timeout', '10', 'wget', '-q', '-O', '-', url(address, '/hello', port))).trim() || undefined,
    60,
  );
  const seconds = (Date.now() - started) / 1000;
  if (seconds > 5) t.log(`${from.name} → ${address}: answered after ${seconds.toFixed(1)} s`);
  return body;
};

test.serial('netplug.yaml edited for dual-stack: a node pod 2/2 on each node, an IPv4 and an IPv6 default pool', async (t) => {
  const c = cluster();
  t.true(
    c.nodes.every((node) => node.address6),
    'every node has an IPv6 address',
  );
  await c.importImage(imageArchive());
  await writeKubeadmConfig(c, { podSubnet: `${CLUSTER_CIDR},${CLUSTER_CIDR6}`, serviceSubnet: '10.96.0.0/16,fd00:10:96::/112' });
  const manifest = manifestFor(
    c,
    'netplug.yaml',
    nodePaths(c),
    {},
    {
      nodeEnv: {
        IP6: 'autodetect',
        NETPLUG_IPV6POOL_CIDR: CLUSTER_CIDR6,
        NETPLUG_IPV6POOL_VXLAN: 'CrossSubnet',
        NETPLUG_IPV6POOL_NAT_OUTGOING: 'true',
      },
      ipam: { assign_ipv6: 'true' },
    },
  );
  const started = Date.now();
  await c.kubectl('apply', '--server-side', '--force-conflicts', '-f', join(ROOT, 'deploy/manifests/crds.yaml'));
  await c.kubectl('wait', '--for=condition=Established', 'crd', '--all', '--timeout=60s');
  await c.kubectl('apply', '--server-side', '--force-conflicts', '-f', manifest);
  await c.kubectl('-n', 'kube-system', 'rollout', 'status', 'daemonset/netplug-node', '--timeout=300s');
  t.log(`apply → every node pod ready: ${((Date.now() - started) / 1000).toFixed(1)} s`);
  const { pools } = JSON.parse(await netplugctl('pool', 'list', '-o', 'json'));
  t.deepEqual(
    pools.map((each: any) => [each.name, each.cidr, each.vxlanMode, each.natOutgoing]),
    [
      ['default-ipv4-ippool', CLUSTER_CIDR, 'CrossSubnet', true],
      ['default-ipv6-ippool', CLUSTER_CIDR6, 'CrossSubnet', true],
    ],
  );
  // IP6=autodetect found each node's IPv6 InternalIP and published it.
  const same = (a: string, b: string) => parseIp(a)?.value === parseIp(b)?.value;
  for (const node of c.nodes) {
    const annotations = await eventually(`${node.name}'s IPv6 address`, async () => {
      const found = (await getJson(c, 'node', node.name)).metadata.annotations ?? {};
      return found[NODE_ADDRESS_ANNOTATIONS.ipv6Address] && found[NODE_ADDRESS_ANNOTATIONS.ipv6VXLANTunnelAddr] ? found : undefined;
    });
    const [address, length] = (annotations[NODE_ADDRESS_ANNOTATIONS.ipv6Address] as string).split('/');
    t.true(same(address!, node.address6!), `${node.name}: ${address} is ${node.address6}`);
    t.is(length, '64');
  }
});

test.serial('a pod pinned to each node gets an IPv4 and an IPv6 address, and the MTU of VXLAN over IPv6 (1430)', async (t) => {
  const c = cluster();
  await startPinnedWebPods(c, 'dual-stack');
  const v4 = parsePrefix(CLUSTER_CIDR)!;
  const v6 = parsePrefix(CLUSTER_CIDR6)!;
  for (const [index, node] of c.nodes.entries()) {
    const made = await getJson(c, 'pod', `pod-${index + 1}`);
    const ips = (made.status.podIPs as { ip: string }[]).map((each) => each.ip);
    t.is(ips.length, 2, `pod-${index + 1}'s podIPs: ${ips.join(', ')}`);
    const ip4 = ips.find((ip) => !ip.includes(':')) ?? '';
    const ip6 = ips.find((ip) => ip.includes(':')) ?? '';
    t.true(contains(v4, 4, parseIp(ip4)!.value), `${ip4} in ${CLUSTER_CIDR}`);
    t.true(contains(v6, 6, parseIp(ip6)!.value), `${ip6} in ${CLUSTER_CIDR6}`);
    pods.push({ name: `pod-${index + 1}`, node, ip4, ip6 });
    // The pod holds it on eth0, a /128 (the kubelet's podIPs come from the plugin's result).
    const held = [...(await exec(pods[index]!, 'ip', '-6', 'addr', 'show', 'dev', 'eth0')).matchAll(/inet6 (\S+)\/128 /g)];
    t.true(
      held.some(([, address]) => parseIp(address!)?.value === parseIp(ip6)!.value),
      `pod-${index + 1}'s eth0: ${held.map(([line]) => line).join(', ')}`,
    );
  }
  // VXLAN over IPv6 (70 bytes) is the largest overhead of the pools: every pod's MTU leaves it.
  const mtu = async (node: ClusterNode, device: string) =>
    /\bmtu (\d+)/.exec(await node.inNode('ip', ['-o', 'link', 'show', 'dev', device]))?.[1];
  t.is(await mtu(c.nodes[2]!, 'eth0'), '1500', 'the underlay MTU');
  t.is(await mtu(c.nodes[2]!, 'vxlan6.netplug'), '1430', "node 3's IPv6 VXLAN device");
  t.is(await mtu(c.nodes[2]!, 'vxlan.netplug'), '1450', "node 3's IPv4 VXLAN device");
  for (const each of pods) t.is((await exec(each, 'cat', '/sys/class/net/eth0/mtu')).trim(), '1430', `${each.name}'s MTU`);
});

test.serial("node 1's IPv6 routes: node 2's block directly via its IPv6 address, node 3's over vxlan6.netplug", async (t) => {
  const [first, second, third] = cluster().nodes;
  const routeTo = async (ip: string) => {
    const routes = JSON.parse(await first!.inNode('ip', ['-j', '-6', 'route', 'show', 'proto', '80'])) as any[];
    const address = parseIp(ip)!.value;
    return routes.find(
      (route) => route.dst !== 'default' && contains(parsePrefix(route.dst.includes('/') ? route.dst : `${route.dst}/128`)!, 6, address),
    );
  };
  const direct = await eventually(`an IPv6 route to ${pod(2).ip6}`, () => routeTo(pod(2).ip6), 60);
  t.is(direct.dev, 'eth0');
  t.is(parseIp(direct.gateway)?.value, parseIp(second!.address6!)!.value, JSON.stringify(direct));
  const tunnelled = await eventually(`an IPv6 route to ${pod(3).ip6}`, () => routeTo(pod(3).ip6), 60);
  t.is(tunnelled.dev, 'vxlan6.netplug', JSON.stringify(tunnelled));
  // The IPv6 FDB sends node 3's IPv6 VXLAN MAC to node 3's IPv6 underlay address.
  const fdb = await first!.inNode('bridge', ['fdb', 'show', 'dev', 'vxlan6.netplug']);
  t.true(
    [...fdb.matchAll(/ dst (\S+) /g)].some(([, dst]) => parseIp(dst!)?.value === parseIp(third!.address6!)!.value),
    fdb,
  );
});

// The Kubernetes datastore's IPv4 routes between nodes (multi-node-etcd.test.ts has them on etcd), in the same cluster.
test.serial(
  "node 1's IPv4 routes: node 2's block directly via 10.250.0.2, node 3's through vxlan.netplug (onlink, its FDB entry)",
  async (t) => {
    const [first, second, third] = cluster().nodes;
    const direct = await eventually(`an IPv4 route to ${pod(2).ip4}`, () => ipv4RouteTo(first!, pod(2).ip4), 60);
    t.like(direct, { gateway: second!.address, dev: 'eth0' });
    const tunnelled = await eventually(`an IPv4 route to ${pod(3).ip4}`, () => ipv4RouteTo(first!, pod(3).ip4), 60);
    t.like(tunnelled, { dev: 'vxlan.netplug' });
    t.true(tunnelled.flags?.includes('onlink'), JSON.stringify(tunnelled));
    t.regex(
      await first!.inNode('bridge', ['fdb', 'show', 'dev', 'vxlan.netplug']),
      new RegExp(`dst ${third!.address.replaceAll('.', '\\.')} `),
    );
  },
);

test.serial('pod to pod across nodes over IPv6 (direct and vxlan6.netplug, both ways) and IPv4', async (t) => {
  for (const [from, to] of [
    [1, 2],
    [1, 3],
    [3, 2],
    [2, 3],
  ] as const) {
    t.is(await fetchFrom(t, pod(from), pod(to).ip6), `pod-${to}`, `pod-${from} → pod-${to} over IPv6`);
    t.regex(await exec(pod(from), 'ping', '-c', '1', '-W', '5', pod(to).ip6), / 0% packet loss/);
  }
  for (const [from, to] of [
    [1, 3],
    [2, 1],
  ] as const)
    t.is(await fetchFrom(t, pod(from), pod(to).ip4), `pod-${to}`, `pod-${from} → pod-${to} over IPv4`);
});

test.serial(
  'bulk TCP over IPv6: 4 MiB across subnets (vxlan6.netplug) both ways arrive whole (no path-MTU black hole at 1430)',
  async (t) => {
    for (const [from, to] of [
      [1, 3],
      [3, 1],
    ] as const) {
      const sent = (await exec(pod(to), 'md5sum', '/www/blob')).split(' ')[0];
      const received = await exec(pod(from), 'sh', '-c', `timeout 60 wget -q -O - '${url(pod(to).ip6, '/blob')}' | md5sum`);
      t.is(received.split(' ')[0], sent, `pod-${to}'s 4 MiB at pod-${from} over IPv6`);
    }
  },
);

test.serial(
  'a RequireDualStack Service: pods on other nodes reach its only endpoint (on node 3) over its IPv6 and IPv4 ClusterIPs',
  async (t) => {
    const c = cluster();
    await apply(c, {
      apiVersion: 'v1',
      kind: 'Service',
      metadata: { name: 'web-3' },
      spec: { ipFamilyPolicy: 'RequireDualStack', selector: { pod: 'pod-3' }, ports: [{ port: 80, targetPort: 8080 }] },
    });
    const clusterIps = (await getJson(c, 'service', 'web-3')).spec.clusterIPs as string[];
    const ip6 = clusterIps.find((ip) => ip.includes(':'));
    const ip4 = clusterIps.find((ip) => !ip.includes(':'));
    t.truthy(ip6 && ip4, clusterIps.join(', '));
    t.is(await fetchFrom(t, pod(1), ip6!, 80), 'pod-3', `pod-1 → [${ip6}]:80`);
    t.is(await fetchFrom(t, pod(2), ip6!, 80), 'pod-3', `pod-2 → [${ip6}]:80`);
    t.is(await fetchFrom(t, pod(1), ip4!, 80), 'pod-3', `pod-1 → ${ip4}:80`);
    await c.kubectl('delete', 'service', 'web-3');
  },
);

test.serial("a node reaches another node's pod over IPv6 (host network to pod), directly and over vxlan6.netplug", async (t) => {
  const [first, second, third] = cluster().nodes;
  for (const [node, target] of [
    [first!, pod(2)],
    [first!, pod(3)],
    [third!, pod(1)],
    [second!, pod(3)],
  ] as const) {
    const body = await eventually(
      `${node.name} → ${target.name} (${target.ip6})`,
      async () => (await node.inNode('curl', ['-gsS', '--max-time', '5', url(target.ip6, '/hello')])).trim() || undefined,
      60,
    );
    t.is(body, target.name, `${node.name} → ${target.name}`);
  }
});

test.serial('IPv6 natOutgoing: a pod reaches the router (outside the pools, knowing no pod address) masqueraded', async (t) => {
  t.regex(await exec(pod(1), 'ping', '-c', '1', '-W', '5', ROUTER6_A), / 0% packet loss/);
  t.regex(await exec(pod(3), 'ping', '-c', '1', '-W', '5', ROUTER6_A), / 0% packet loss/);
});

test.serial('VXLAN Always on the IPv4 pool: node 2 is reached through vxlan.netplug too, and 4 MiB still arrive whole', async (t) => {
  const [first] = cluster().nodes;
  await netplugctl('pool', 'update', 'default-ipv4-ippool', '--vxlan-mode', 'Always');
  const viaTunnel = await eventually(
    `node 1's route to ${pod(2).ip4} through vxlan.netplug`,
    async () => {
      const route = await ipv4RouteTo(first!, pod(2).ip4);
      return route?.dev === 'vxlan.netplug' ? route : undefined;
    },
    60,
  );
  t.true(viaTunnel.flags?.includes('onlink'), JSON.stringify(viaTunnel));
  const sent = (await exec(pod(2), 'md5sum', '/www/blob')).split(' ')[0];
  const received = await exec(pod(1), 'sh', '-c', `timeout 60 wget -q -O - '${url(pod(2).ip4, '/blob')}' | md5sum`);
  t.is(received.split(' ')[0], sent, "pod-2's 4 MiB at pod-1 over VXLAN");
  await netplugctl('pool', 'update', 'default-ipv4-ippool', '--vxlan-mode', 'CrossSubnet');
});

test.serial(
  "deleting the pods releases their addresses of both families: what stays is the other pods' and each node's tunnel addresses",
  async (t) => {
    const c = cluster();
    await c.kubectl('delete', 'pods', '-l', 'app=dual-stack', '--wait=true', '--grace-period=1');
    const holders =
      (await getJson(c, 'pods', '-A')).items.filter((each: any) => !each.spec.hostNetwork && each.status.podIP).length + c.nodes.length;
    const allocated = await eventually(
      `${holders} address(es) allocated in each pool`,
      async () => {
        const { pools } = JSON.parse(await netplugctl('ipam', 'show', '-o', 'json'));
        const counts = Object.fromEntries(pools.map((each: any) => [each.name, each.allocated]));
        return Object.values(counts).every((count) => count === holders) ? counts : undefined;
      },
      60,
    );
    t.deepEqual(allocated, { 'default-ipv4-ippool': holders, 'default-ipv6-ippool': holders });
  },
);
