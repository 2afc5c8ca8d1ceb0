// Part 1 of bench/policy.ts: a pod's ADD through the shim and its node's agent (spawned natively, as
// bench/agent.ts does) in a namespace with a default-deny policy and 50 others, with enforcement on
// and off, the two agents rotated pod by pod so that drift hits both alike; and where each ADD's
// time went, from the agents' own timings.
import { execFileSync, spawnSync } from 'node:child_process';
import { join } from 'node:path';

import { breakdown, interfaceGone, type AgentCycle } from '../lib/agent-breakdown.ts';
import { runChecked, runtimeEnv, stopNativeRuns } from '../lib/run-plugin.ts';
import type { Cluster } from './cluster.ts';
import { addNamespacePolicies } from './objects.ts';
import { CNI_PATH, collector, NETPLUG } from './session.ts';
import { CYCLES, WARMUP } from './settings.ts';

const NAMESPACE = 'bench-add';

type Variant = 'on' | 'off';

export interface AddResults {
  /** Each ADD's time, spawn to exit (ms). */
  samples: Record<Variant, number[]>;
  /** Where the ADDs' time went, part by part (agent-breakdown.ts's PARTS). */
  parts: Record<Variant, ReturnType<typeof breakdown>>;
}

async function addCycles({ kube, core, agents }: Cluster): Promise<AddResults> {
  const samples = { on: [] as number[], off: [] as number[] };
  const cycles = { on: [] as AgentCycle[], off: [] as AgentCycle[] };
  const netns = { on: `nppb-add-on-${process.pid}`, off: `nppb-add-off-${process.pid}` };
  for (const name of Object.values(netns)) {
    execFileSync('ip', ['netns', 'add', name]);
    collector.teardown(() => spawnSync('ip', ['netns', 'del', name]));
  }
  let n = 0;
  const cycle = async (variant: Variant): Promise<AgentCycle> => {
    const agent = agents[variant];
    const pod = `add-${variant}-${n++}`;
    const created = await core.createNamespacedPod({
      namespace: NAMESPACE,
      body: {
        metadata: { name: pod, labels: { app: 'web' } },
        spec: { nodeName: agent.node.name, containers: [{ name: 'main', image: 'busybox' }] },
      },
    });
    const netconf = JSON.stringify({
      cniVersion: '1.1.0',
      name: 'bench-policy',
      type: 'netplug',
      nodename: agent.node.name,
      datastore_type: 'kubernetes',
      kubernetes: { kubeconfig: kube.admin.kubeconfig },
      ipam: { type: 'netplug-ipam' },
      // With enforcement, the ADD answers once the pod's policy is in the kernel (its status file).
      ...(variant === 'on'
        ? { policy_setup_timeout_seconds: 30, endpoint_status_dir: join(agent.node.varDir, 'run', 'endpoint-status') }
        : {}),
    });
    const container = `bench${variant}${n}`;
    const env = (command: string) =>
      runtimeEnv(command, container, netns[variant], CNI_PATH, {
        CNI_ARGS: `IgnoreUnknown=1;K8S_POD_NAMESPACE=${NAMESPACE};K8S_POD_NAME=${pod};K8S_POD_INFRA_CONTAINER_ID=${container};K8S_POD_UID=${created.metadata?.uid}`,
        NETPLUG_AGENT_SOCKET: join(agent.node.varDir, 'run', 'cni.sock'),
      });
    const add = await runChecked(`enforcement ${variant}`, NETPLUG, env('ADD'), netconf);
    const del = await runChecked(`enforcement ${variant}`, NETPLUG, env('DEL'), netconf);
    await core.deleteNamespacedPod({ namespace: NAMESPACE, name: pod, gracePeriodSeconds: 0 });
    await interfaceGone(netns[variant]);
    return { container, add, del };
  };
  for (let i = 0; i < WARMUP; i++) for (const variant of ['on', 'off'] as const) await cycle(variant);
  for (let i = 0; i < CYCLES; i++)
    for (const variant of i % 2 === 0 ? (['on', 'off'] as const) : (['off', 'on'] as const)) {
      const done = await cycle(variant);
      samples[variant].push(done.add.ms);
      cycles[variant].push(done);
    }
  return {
    samples,
    parts: {
      on: breakdown(agents.on.timings, cycles.on, 'ADD'),
      off: breakdown(agents.off.timings, cycles.off, 'ADD'),
    },
  };
}

/** Part 1: the ADD namespace and its policies, both agents started, the ADDs, both agents stopped. */
export async function measureAdds(cluster: Cluster): Promise<AddResults> {
  const { core, networking, agents } = cluster;
  await core.createNamespace({ body: { metadata: { name: NAMESPACE } } });
  for (const body of addNamespacePolicies()) await networking.createNamespacedNetworkPolicy({ namespace: NAMESPACE, body });
  agents.on.start();
  agents.off.start();
  await Promise.all([agents.on.ready(), agents.off.ready()]);
  const results = await addCycles(cluster);
  // The native spawner goes with the last plugin run: the parts after spawn none.
  await stopNativeRuns();
  await Promise.all([agents.on.stop(), agents.off.stop()]);
  return results;
}
