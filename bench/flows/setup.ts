// What bench/flows.ts runs against: a real kube-apiserver (the Kubernetes datastore), the flow-log
// aggregator (the built netplug-flows, on the host's loopback, checking the node's token by
// TokenReview), and two nodes (network namespaces reaching both through relays,
// test/helpers/nodes.ts), each running the built netplug-node with policy enforced, one with flow
// logs on and one without. On each node a server pod and a client pod (network namespaces plugged
// in as the plugin plugs them, with their Pod objects), the same NetworkPolicy selecting both
// servers, iperf3's server and a TCP listener in each server pod.
import { spawn, spawnSync, execFileSync, type ChildProcess } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';

import * as k8s from '@kubernetes/client-node';

import { freePort } from '../../scripts/lib/etcd-server.ts';
import { launchKubeApiserver } from '../../scripts/lib/kube-server.ts';
import { installCrds } from '../../scripts/lib/netplug-crds.ts';
import { makeTopology, type TestNode } from '../../test/helpers/nodes.ts';
import { hostInterfaceName } from '../../ts/dataplane/index.ts';
import { Agent } from '../policy/agent.ts';
import { collector, NETPLUG_NODE, scratch, until } from '../policy/session.ts';
import { connectFor, deniedTries } from './traffic.ts';
import { CONN_PORT, CONTROL, INTERVAL_SECONDS, IPERF_PORT, NAMESPACE, POLICY, SIDES, VARIANTS, WRITER, type Variant } from './settings.ts';

/** One variant's node, its agent and its pods. */
export interface Side {
  variant: Variant;
  node: TestNode;
  agent: Agent;
  /** The pods' network namespaces and addresses. */
  server: { netns: string; address: string };
  client: { netns: string; address: string };
}

export interface Setup {
  sides: Record<Variant, Side>;
  aggregator: { pid: number; readPort: number; log(): string };
}

export const log = (text: string) => console.error(`[bench:flows ${new Date().toISOString().slice(11, 19)}] ${text}`);

/** A process that lives until the run's end. */
function background(command: string[], env?: Record<string, string>): ChildProcess {
  const child = spawn(command[0] as string, command.slice(1), { stdio: ['ignore', 'ignore', 'pipe'], ...(env ? { env } : {}) });
  collector.teardown(() => child.kill('SIGKILL'));
  return child;
}

/** A pod's network namespace plugged into `node` as the plugin plugs it: eth0 with the address, routed from the node's side `hostSide`. */
function plug(node: TestNode, label: string, address: string, hostSide: string): string {
  const netns = `npfb-${label}-${process.pid}`;
  execFileSync('ip', ['netns', 'add', netns]);
  collector.teardown(() => spawnSync('ip', ['netns', 'del', netns]));
  execFileSync('ip', ['link', 'add', 'eth0', 'netns', netns, 'type', 'veth', 'peer', 'name', hostSide, 'netns', node.netns.name]);
  const sh = (ns: string, script: string) => execFileSync('ip', ['netns', 'exec', ns, 'sh', '-ec', script]);
  sh(
    netns,
    `ip link set lo up; ip addr add ${address}/32 dev eth0; ip link set eth0 up
     ip route add 169.254.1.1 dev eth0 scope link; ip route add default via 169.254.1.1 dev eth0`,
  );
  sh(
    node.netns.name,
    `ip link set ${hostSide} up; sysctl -qw net.ipv4.conf.${hostSide}.proxy_arp=1 net.ipv4.neigh.${hostSide}.proxy_delay=0
     ip route add ${address}/32 dev ${hostSide}`,
  );
  return netns;
}

/** Until something listens on TCP `port` in `netns`. */
const listening = (netns: string, port: number) =>
  until(
    `a listener on port ${port} in ${netns}`,
    () => spawnSync('ip', ['netns', 'exec', netns, 'ss', '-Hltn', `sport = :${port}`], { encoding: 'utf8' }).stdout.trim() !== '',
    30_000,
  );

/** Whether a connection from the client to the server's port 9 (no listener, not allowed) is dropped: no answer within a second. */
function dropped(side: Side): boolean {
  deniedTries[side.variant]++;
  const script = `const s = require('node:net').connect(9, '${side.server.address}'); s.on('error', () => process.exit(1)); s.on('connect', () => process.exit(1)); setTimeout(() => process.exit(0), 1000);`;
  return spawnSync('ip', ['netns', 'exec', side.client.netns, process.execPath, '-e', script], { timeout: 10_000 }).status === 0;
}

export async function setUp(): Promise<Setup> {
  log('starting etcd, kube-apiserver and netplug-flows');
  const kube = await launchKubeApiserver(join(scratch, 'kube'));
  collector.teardown(() => kube.stop());
  await installCrds(kube.admin.kubeconfig);
  const config = new k8s.KubeConfig();
  config.loadFromFile(kube.admin.kubeconfig);
  const core = config.makeApiClient(k8s.CoreV1Api);
  const networking = config.makeApiClient(k8s.NetworkingV1Api);
  for (const variant of VARIANTS) {
    const name = SIDES[variant].node;
    await core.createNode({ body: { metadata: { name, labels: { 'kubernetes.io/hostname': name } } } });
  }
  await core.createNamespace({ body: { metadata: { name: NAMESPACE } } });

  // The node's identity at the aggregator: a ServiceAccount's token for audience netplug-flows.
  await core.createNamespacedServiceAccount({ namespace: WRITER.namespace, body: { metadata: { name: WRITER.name } } });
  const token = (await core.createNamespacedServiceAccountToken({
    namespace: WRITER.namespace,
    name: WRITER.name,
    body: { spec: { audiences: ['netplug-flows'], expirationSeconds: 24 * 3600 } } as k8s.AuthenticationV1TokenRequest,
  })) as k8s.AuthenticationV1TokenRequest;
  const tokenFile = join(scratch, 'flows-token');
  writeFileSync(tokenFile, token.status?.token ?? '');

  const writePort = await freePort();
  const readPort = await freePort();
  const aggregator = background([join(dirname(NETPLUG_NODE), 'netplug-flows')], {
    PATH: '/usr/bin:/bin',
    KUBECONFIG: kube.admin.kubeconfig,
    NETPLUG_FLOWS_LISTEN: `127.0.0.1:${writePort}`,
    NETPLUG_FLOWS_READ_LISTEN: `127.0.0.1:${readPort}`,
    NETPLUG_FLOWS_HEALTH_ADDR: `127.0.0.1:${await freePort()}`,
    NETPLUG_FLOWS_WRITERS: `${WRITER.namespace}:${WRITER.name}`,
  });
  let aggregatorLog = '';
  aggregator.stderr?.setEncoding('utf8').on('data', (text: string) => {
    aggregatorLog = (aggregatorLog + text).slice(-20_000);
  });
  await until('netplug-flows serving', () => {
    if (aggregator.exitCode !== null) throw new Error(`netplug-flows exited: ${aggregatorLog}`);
    return /serving reads on/.test(aggregatorLog);
  });

  const topology = await makeTopology(collector, {
    nodes: VARIANTS.map((variant) => ({ name: SIDES[variant].node, subnet: 1 as const })),
    ports: [Number(new URL(kube.url).port), writePort],
    datastoreNetconf: { datastore_type: 'kubernetes', kubernetes: { kubeconfig: kube.admin.kubeconfig } },
    agentEnv: {},
  });

  // One policy for both nodes' servers: ingress from the client pods only, on the two ports.
  await networking.createNamespacedNetworkPolicy({
    namespace: NAMESPACE,
    body: {
      metadata: { name: POLICY },
      spec: {
        podSelector: { matchLabels: { app: 'server' } },
        policyTypes: ['Ingress'],
        ingress: [{ _from: [{ podSelector: { matchLabels: { app: 'client' } } }], ports: [{ port: IPERF_PORT }, { port: CONN_PORT }] }],
      },
    },
  });

  const sides = {} as Record<Variant, Side>;
  for (const [index, variant] of VARIANTS.entries()) {
    const node = topology.nodes[index] as TestNode;
    const { server, client } = SIDES[variant];
    const pod = async (name: string, app: string, address: string) => {
      const created = await core.createNamespacedPod({
        namespace: NAMESPACE,
        body: { metadata: { name, labels: { app } }, spec: { nodeName: node.name, containers: [{ name: 'main', image: 'busybox' }] } },
      });
      created.status = { ...created.status, phase: 'Running', podIP: address, podIPs: [{ ip: address }] };
      await core.replaceNamespacedPodStatus({ namespace: NAMESPACE, name, body: created });
      return plug(node, name, address, hostInterfaceName('cali', `${NAMESPACE}.${name}`));
    };
    const serverNetns = await pod(`server-${variant}`, 'server', server);
    const clientNetns = await pod(`client-${variant}`, 'client', client);
    // The client opens thousands of connections a second and closes them first: its ports are
    // reused once in TIME_WAIT (as a busy client pod would be tuned), from the whole range.
    execFileSync('ip', [
      'netns',
      'exec',
      clientNetns,
      'sysctl',
      '-qw',
      'net.ipv4.tcp_tw_reuse=1',
      'net.ipv4.ip_local_port_range=1024 65535',
    ]);
    background(['ip', 'netns', 'exec', serverNetns, 'iperf3', '--server', '--port', String(IPERF_PORT)]);
    background([
      'ip',
      'netns',
      'exec',
      serverNetns,
      process.execPath,
      '-e',
      `require('node:net').createServer((s) => { s.on('error', () => {}); s.resume(); }).listen({ port: ${CONN_PORT}, backlog: 4096 })`,
    ]);
    const env: Record<string, string> = {
      PATH: '/usr/sbin:/usr/bin:/sbin:/bin',
      NODENAME: node.name,
      DATASTORE_TYPE: 'kubernetes',
      KUBECONFIG: kube.admin.kubeconfig,
      NO_DEFAULT_POOLS: 'true',
      NETPLUG_NETWORKING_BACKEND: 'none',
      NETPLUG_POLICY_ENFORCEMENT: 'true',
      NETPLUG_VAR_DIR: node.varDir,
      NETPLUG_AGENT_SOCKET: join(node.varDir, 'run', 'cni.sock'),
      NETPLUG_ENDPOINT_STATUS_PATH_PREFIX: join(node.varDir, 'run'),
      NETPLUG_HEALTH_ADDR: '127.0.0.1:9099',
      ...(variant === 'on' && !CONTROL
        ? {
            NETPLUG_FLOW_LOGS: 'true',
            NETPLUG_FLOW_LOGS_INTERVAL: String(INTERVAL_SECONDS),
            NETPLUG_FLOW_LOGS_AGGREGATOR: `http://127.0.0.1:${writePort}`,
            NETPLUG_FLOW_LOGS_TOKEN_FILE: tokenFile,
          }
        : {}),
    };
    sides[variant] = {
      variant,
      node,
      agent: new Agent(node, env),
      server: { netns: serverNetns, address: server },
      client: { netns: clientNetns, address: client },
    };
  }

  log('starting both agents');
  for (const side of Object.values(sides)) side.agent.start();
  for (const side of Object.values(sides)) {
    await side.agent.ready();
    if (side.variant === 'on' && !CONTROL && !/flow logs: recording every/.test(side.agent.logText))
      throw new Error(`flow logs are not on: ${side.agent.logText.slice(-3000)}`);
    await listening(side.server.netns, IPERF_PORT);
    await listening(side.server.netns, CONN_PORT);
    // The server is policed: the client's connection to a port the policy does not allow is
    // dropped (not refused by the server's kernel); then the allowed ports connect.
    await until(`${side.variant}: the server's policy in place`, () => dropped(side), 120_000, 200);
    await until(
      `${side.variant}: the client connecting to the server`,
      async () => (await connectFor(side, 0.2, 1)).completed > 0,
      60_000,
      200,
    );
  }
  await sleep(1000);
  return { sides, aggregator: { pid: aggregator.pid ?? 0, readPort, log: () => aggregatorLog } };
}
