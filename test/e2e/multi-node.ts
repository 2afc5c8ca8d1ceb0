// netplug across the nodes of a real three-node cluster (scripts/lib/cluster-nodes.ts), installed
// by its manifest, with real packets: node 1 (the control plane's) and node 2 on subnet A, node 3
// on subnet B behind a router that knows no pod address. The default pool is VXLAN CrossSubnet:
// node 2's pods are reached by a direct route through node 2's address, node 3's through the VXLAN
// device; pods get the underlay's MTU less VXLAN's 50 bytes, so a bulk transfer across subnets
// goes through (no path-MTU black hole). Node 3's pod is also published on a hostPort, reached
// from the other subnet; then the pool is switched to VXLAN Always, which carries node 2's pods
// through the VXLAN device too.
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';

import type { TestFn } from 'ava';

import { apply, clusterPerFile, getJson, type ClusterNode } from '../helpers/cluster.ts';
import { contains, parseIp, parsePrefix } from '../../ts/net/cidr.ts';
import { eventually, imageArchive, manifestFor, NETPLUGCTL, nodePaths, writeKubeadmConfig } from './install.ts';
import { startPinnedWebPods } from './pinned-pods.ts';
import type { Datastore } from './scenario.ts';

const run = promisify(execFile);
const ROOT = new URL('../../', import.meta.url).pathname;
const VXLAN_DEVICE = 'vxlan.netplug';
const HOST_PORT = 18081;

interface PinnedPod {
  name: string;
  node: ClusterNode;
  ip: string;
}

export function multiNodeScenario(test: TestFn, datastore: Datastore): void {
  const cluster = clusterPerFile(test, { nodes: 3, systemPlugins: false });
  const file = datastore === 'kubernetes' ? 'netplug.yaml' : 'netplug-etcd.yaml';
  const pods: PinnedPod[] = [];
  const netplugctl = async (...args: string[]) => {
    if (datastore === 'kubernetes') return (await run(NETPLUGCTL, ['--kubeconfig', cluster().kubeconfig, ...args])).stdout;
    return cluster().inNode(NETPLUGCTL, ['--etcd-endpoints', 'http://127.0.0.1:2379', ...args]);
  };
  const exec = (pod: PinnedPod, ...command: string[]) => cluster().kubectl('exec', pod.name, '--', ...command);
  const pod = (index: number) => {
    const found = pods[index - 1];
    if (!found) throw new Error(`pod-${index} was not made (see the test that makes them)`);
    return found;
  };

  test.serial(`${file} on three nodes: a node pod 2/2 on each, controllers 1/1, each node's host paths its own`, async (t) => {
    const c = cluster();
    t.is(c.nodes.length, 3);
    await c.importImage(imageArchive());
    await writeKubeadmConfig(c);
    const paths = nodePaths(c);
    const data: Record<string, string> = datastore === 'etcdv3' ? { etcd_endpoints: `http://${c.nodeIp}:2379` } : {};
    const manifest = manifestFor(c, file, paths, data);
    const started = Date.now();
    await c.kubectl('apply', '--server-side', '--force-conflicts', '-f', join(ROOT, 'deploy/manifests/crds.yaml'));
    await c.kubectl('wait', '--for=condition=Established', 'crd', '--all', '--timeout=60s');
    await c.kubectl('apply', '--server-side', '--force-conflicts', '-f', manifest);
    await c.kubectl('-n', 'kube-system', 'rollout', 'status', 'daemonset/netplug-node', '--timeout=300s');
    t.log(`apply → every node pod ready: ${((Date.now() - started) / 1000).toFixed(1)} s`);
    await c.kubectl('-n', 'kube-system', 'rollout', 'status', 'deployment/netplug-kube-controllers', '--timeout=300s');
    const nodePods = (await getJson(c, 'pods', '-n', 'kube-system', '-l', 'k8s-app=netplug-node')).items as any[];
    t.deepEqual(nodePods.map((each) => each.spec.nodeName).sort(), c.nodes.map((node) => node.name).sort());
    // What each node's installer and agent wrote, read inside each node: its own name, its own plugin.
    for (const node of c.nodes) {
      t.is((await node.inNode('cat', [join(paths.varLib, 'nodename')])).trim(), node.name, `${node.name}'s nodename file`);
      t.regex(await node.inNode('ls', [c.cniBinDir]), /^netplug$/m, `the plugin in ${node.name}'s CNI directory`);
      t.regex(await node.inNode('ls', [c.cniConfDir]), /^10-netplug\.conflist$/m);
    }
    const { pools } = JSON.parse(await netplugctl('pool', 'list', '-o', 'json'));
    t.deepEqual(
      pools.map((pool: any) => [pool.name, pool.vxlanMode ?? pool.spec?.vxlanMode]),
      [['default-ipv4-ippool', 'CrossSubnet']],
    );
  });

  test.serial('a pod pinned to each node gets an address and the underlay MTU less VXLAN (1450)', async (t) => {
    const c = cluster();
    // Node 3's pod is also published on its node's address (the chained portmap).
    await startPinnedWebPods(c, 'multi-node', { nodeIndex: 2, port: HOST_PORT });
    for (const [index, node] of c.nodes.entries()) {
      const made = await getJson(c, 'pod', `pod-${index + 1}`);
      t.is(made.spec.nodeName, node.name);
      pods.push({ name: `pod-${index + 1}`, node, ip: made.status.podIP });
    }
    t.is(new Set(pods.map((each) => each.ip)).size, 3);
    // From ip, not /sys: a node's mount namespace has the host's sysfs, which shows the host's links.
    const mtu = async (node: ClusterNode, device: string) =>
      /\bmtu (\d+)/.exec(await node.inNode('ip', ['-o', 'link', 'show', 'dev', device]))?.[1];
    t.is(await mtu(c.nodes[2]!, 'eth0'), '1500', 'the underlay MTU');
    t.is(await mtu(c.nodes[2]!, VXLAN_DEVICE), '1450', "node 3's VXLAN device");
    for (const each of pods) t.is((await exec(each, 'cat', '/sys/class/net/eth0/mtu')).trim(), '1450', `${each.name}'s MTU`);
  });

  test.serial("node 1's routes: node 2's block directly via 10.250.0.2, node 3's through the VXLAN device", async (t) => {
    const c = cluster();
    const [first, second, third] = c.nodes;
    const routeTo = async (ip: string) => {
      const routes = JSON.parse(await first!.inNode('ip', ['-j', '-4', 'route', 'show', 'proto', '80'])) as any[];
      const address = parseIp(ip)!;
      const prefixOf = (dst: string) => parsePrefix(dst.includes('/') ? dst : `${dst}/32`);
      return routes.find((route) => route.dst !== 'default' && contains(prefixOf(route.dst)!, 4, address.value));
    };
    const direct = await eventually(`a route to ${pod(2).ip}`, () => routeTo(pod(2).ip), 60);
    t.like(direct, { gateway: second!.address, dev: 'eth0' });
    const tunnelled = await eventually(`a route to ${pod(3).ip}`, () => routeTo(pod(3).ip), 60);
    t.like(tunnelled, { dev: VXLAN_DEVICE });
    t.true(tunnelled.flags?.includes('onlink'), JSON.stringify(tunnelled));
    // The FDB sends node 3's VXLAN MAC to node 3's underlay address.
    t.regex(
      await first!.inNode('bridge', ['fdb', 'show', 'dev', VXLAN_DEVICE]),
      new RegExp(`dst ${third!.address.replaceAll('.', '\\.')} `),
    );
    t.log(await first!.inNode('ip', ['-4', 'route', 'show', 'proto', '80']));
  });

  test.serial('pod to pod across nodes: on one subnet (direct) and across subnets (VXLAN), both ways', async (t) => {
    for (const [from, to] of [
      [1, 2],
      [1, 3],
      [3, 2],
      [2, 3],
    ] as const) {
      const body = await eventually(
        `pod-${from} → pod-${to}`,
        async () =>
          (await exec(pod(from), 'timeout', '10', 'wget', '-q', '-O', '-', `http://${pod(to).ip}:8080/hello`)).trim() || undefined,
        60,
      );
      t.is(body, `pod-${to}`);
      t.regex(await exec(pod(from), 'ping', '-c', '1', '-W', '5', pod(to).ip), / 0% packet loss/);
    }
  });

  test.serial("a pod reaches a ClusterIP Service whose only endpoint is on another node's subnet", async (t) => {
    const c = cluster();
    await apply(c, {
      apiVersion: 'v1',
      kind: 'Service',
      metadata: { name: 'web-3' },
      spec: { selector: { pod: 'pod-3' }, ports: [{ port: 80, targetPort: 8080 }] },
    });
    const clusterIp = (await getJson(c, 'service', 'web-3')).spec.clusterIP as string;
    for (const from of [1, 2]) {
      const body = await eventually(
        `pod-${from} → web-3 (${clusterIp})`,
        async () => (await exec(pod(from), 'timeout', '10', 'wget', '-q', '-O', '-', `http://${clusterIp}/hello`)).trim() || undefined,
        60,
      );
      t.is(body, 'pod-3');
    }
    await c.kubectl('delete', 'service', 'web-3');
  });

  test.serial("a node reaches another node's pod (host network to pod), directly and through VXLAN", async (t) => {
    const c = cluster();
    const [first, second, third] = c.nodes;
    for (const [node, target] of [
      [first!, pod(2)],
      [first!, pod(3)],
      [third!, pod(1)],
      [second!, pod(3)],
    ] as const) {
      const body = await eventually(
        `${node.name} → ${target.name}`,
        async () => (await node.inNode('curl', ['-sS', '--max-time', '5', `http://${target.ip}:8080/hello`])).trim() || undefined,
        60,
      );
      t.is(body, target.name, `${node.name} → ${target.name}`);
    }
  });

  test.serial(
    'bulk TCP: 4 MiB between pods across subnets, both ways, and on one subnet, arrive whole (no path-MTU black hole)',
    async (t) => {
      for (const [from, to] of [
        [1, 3],
        [3, 1],
        [2, 1],
      ] as const) {
        const sent = (await exec(pod(to), 'md5sum', '/www/blob')).split(' ')[0];
        const received = await exec(pod(from), 'sh', '-c', `timeout 60 wget -q -O - http://${pod(to).ip}:8080/blob | md5sum`);
        t.is(received.split(' ')[0], sent, `pod-${to}'s 4 MiB at pod-${from}`);
      }
    },
  );

  test.serial("node 3's hostPort answers on node 3's address, from a pod and from a node on the other subnet", async (t) => {
    const c = cluster();
    const [first, , third] = c.nodes;
    const url = `http://${third!.address}:${HOST_PORT}/hello`;
    const fromPod = await eventually(
      `pod-1 → ${url}`,
      async () => (await exec(pod(1), 'timeout', '10', 'wget', '-q', '-O', '-', url)).trim() || undefined,
      60,
    );
    t.is(fromPod, 'pod-3');
    const fromNode = await eventually(
      `${first!.name} → ${url}`,
      async () => (await first!.inNode('curl', ['-sS', '--max-time', '5', url])).trim() || undefined,
      60,
    );
    t.is(fromNode, 'pod-3');
  });

  test.serial('VXLAN Always: the pool switched, node 2 is reached through the VXLAN device too, and pods still talk', async (t) => {
    const c = cluster();
    const [first, second] = c.nodes;
    await netplugctl('pool', 'update', 'default-ipv4-ippool', '--vxlan-mode', 'Always');
    const viaTunnel = await eventually(
      `node 1's route to ${pod(2).ip} through ${VXLAN_DEVICE}`,
      async () => {
        const routes = JSON.parse(await first!.inNode('ip', ['-j', '-4', 'route', 'show', 'proto', '80', 'dev', VXLAN_DEVICE])) as any[];
        const address = parseIp(pod(2).ip)!;
        return routes.find((route) => route.dst.includes('/') && contains(parsePrefix(route.dst)!, 4, address.value));
      },
      60,
    );
    t.true(viaTunnel.flags?.includes('onlink'), JSON.stringify(viaTunnel));
    t.regex(
      await first!.inNode('bridge', ['fdb', 'show', 'dev', VXLAN_DEVICE]),
      new RegExp(`dst ${second!.address.replaceAll('.', '\\.')} `),
    );
    for (const [from, to] of [
      [1, 2],
      [2, 1],
      [2, 3],
    ] as const) {
      const sent = (await exec(pod(to), 'md5sum', '/www/blob')).split(' ')[0] ?? '';
      const received = await eventually(
        `pod-${from} → pod-${to} over VXLAN`,
        async () => {
          const got = (await exec(pod(from), 'sh', '-c', `timeout 60 wget -q -O - http://${pod(to).ip}:8080/blob | md5sum`)).split(' ')[0];
          return got === sent ? got : undefined;
        },
        60,
      );
      t.is(received, sent, `pod-${to}'s 4 MiB at pod-${from}`);
    }
    await netplugctl('pool', 'update', 'default-ipv4-ippool', '--vxlan-mode', 'CrossSubnet');
  });

  test.serial(
    "deleting the pods releases their addresses: what stays allocated is the other pods' and each node's VXLAN tunnel address",
    async (t) => {
      const c = cluster();
      await c.kubectl('delete', 'pods', '-l', 'app=multi-node', '--wait=true', '--grace-period=1');
      const holders =
        (await getJson(c, 'pods', '-A')).items.filter((each: any) => !each.spec.hostNetwork && each.status.podIP).length + c.nodes.length;
      const allocated = await eventually(
        `${holders} address(es) allocated`,
        async () => {
          const { pools } = JSON.parse(await netplugctl('ipam', 'show', '-o', 'json'));
          const count = pools.reduce((sum: number, each: any) => sum + each.allocated, 0);
          return count === holders ? count : undefined;
        },
        60,
      );
      t.is(allocated, holders);
    },
  );
}
