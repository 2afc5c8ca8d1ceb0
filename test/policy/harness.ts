// The compiler's side of the generated tests: a world's resources fed to one PolicyEngine per
// node (as netplug-node would feed them), and a probe turned into the packets each node's table
// sees (source node's forward hook, then the destination node's, or one node's when both pods
// are there), interpreted (interpret.ts) to a verdict the model's can be compared with.
import { checkPolicyDocument } from '../../ts/model/policy-check.ts';
import type { NetworkPolicyResource } from '../../ts/model/policy.ts';
import type { TablePart } from '../../ts/nft/model.ts';
import { PolicyEngine, type PolicyEngineOptions, type PolicyIssue } from '../../ts/policy/engine.ts';
import type { EndpointInput } from '../../ts/policy/endpoints.ts';
import { convertKubernetesPolicy, namespaceProfile, serviceAccountProfile } from '../../ts/policy/kubernetes.ts';
import type { PolicySnapshot } from '../../ts/policy/explain.ts';
import type { TestPod } from './cluster.ts';
import { interpret, type NftPacket, type Trace } from './interpret.ts';
import { PROTOCOL_NUMBER, SOURCE_PORT, addressOf, type PolicyWorld, type Probe, type Verdict } from './model.ts';

/** The host's uplink in the synthetic packets: any interface that is not a workload's. */
export const UPLINK = 'eth0';

export function endpointOf(pod: TestPod, withInterface = true): EndpointInput {
  return {
    key: pod.key,
    namespace: pod.namespace,
    name: pod.name,
    labels: pod.labels,
    serviceAccount: pod.serviceAccount,
    // A pod without IPv6 (ipv6 '': the kubelet cluster's) has its IPv4 address only.
    addresses: [`${pod.ipv4}/32`, ...(pod.ipv6 ? [`${pod.ipv6}/128`] : [])],
    ports: pod.ports,
    node: pod.node,
    ...(withInterface ? { interfaceName: pod.interfaceName } : {}),
  };
}

/** The world's netplug policies, checked as netplugctl and the agent check them (defaults filled in). */
export function checkedPolicies(world: PolicyWorld): NetworkPolicyResource[] {
  return world.policies.map((policy) => checkPolicyDocument(policy) as NetworkPolicyResource);
}

/** Everything of the world as explain and the engine read it (Kubernetes policies converted). */
export function snapshotOf(world: PolicyWorld): PolicySnapshot {
  return {
    endpoints: world.cluster.pods.map((pod) => endpointOf(pod)),
    profiles: [
      ...world.cluster.namespaces.map((n) => namespaceProfile({ metadata: n })),
      ...world.cluster.serviceAccounts.map((a) => serviceAccountProfile({ metadata: a })),
    ],
    networkSets: world.networkSets,
    policies: [...world.kubernetesPolicies.map((p) => convertKubernetesPolicy(p).policy), ...checkedPolicies(world)],
    tiers: world.tiers,
  };
}

/** An engine for `node` fed the whole world; its issues are returned beside it. */
export function engineFor(
  world: PolicyWorld,
  node: string,
  options: Partial<PolicyEngineOptions> = {},
): { engine: PolicyEngine; issues: PolicyIssue[] } {
  const engine = new PolicyEngine({ nodeName: node, ...options });
  const snapshot = snapshotOf(world);
  const issues: PolicyIssue[] = [];
  for (const tier of snapshot.tiers) engine.upsertTier(tier);
  for (const profile of snapshot.profiles) issues.push(...engine.upsertProfile(profile));
  for (const set of snapshot.networkSets) engine.upsertNetworkSet(set);
  for (const endpoint of snapshot.endpoints) engine.upsertEndpoint(endpoint);
  for (const policy of snapshot.policies) issues.push(...engine.upsertPolicy(policy));
  for (const policy of world.kubernetesPolicies)
    issues.push(...convertKubernetesPolicy(policy).issues.map((issue) => ({ policy: policy.metadata.name, ...issue })));
  engine.flush();
  return { engine, issues };
}

/** One part per node of the world's pods. */
export function partsFor(world: PolicyWorld, options: Partial<PolicyEngineOptions> = {}): Map<string, TablePart> {
  const nodes = new Set(world.cluster.pods.map((pod) => pod.node));
  return new Map([...nodes].map((node) => [node, engineFor(world, node, options).engine.part()]));
}

/** The packets of a probe, per node whose table sees it. */
export function packetsOf(probe: Probe, ct: NftPacket['ct'] = 'new'): { node: string | undefined; packet: NftPacket }[] {
  const from = 'pod' in probe.from ? probe.from.pod : undefined;
  const to = 'pod' in probe.to ? probe.to.pod : undefined;
  const icmp = probe.protocol === 'ICMP';
  const base: Omit<NftPacket, 'hook' | 'iifname' | 'oifname'> = {
    family: probe.family,
    saddr: addressOf(probe.from, probe.family),
    daddr: addressOf(probe.to, probe.family),
    l4proto: icmp ? (probe.family === 4 ? 1 : 58) : (PROTOCOL_NUMBER[probe.protocol] as number),
    ...(icmp
      ? { icmpType: probe.icmpType ?? (probe.family === 4 ? 8 : 128), icmpCode: probe.icmpCode ?? 0 }
      : { sport: probe.sourcePort ?? SOURCE_PORT, dport: probe.port }),
    ct,
  };
  if (from && to && from.node === to.node)
    return [{ node: from.node, packet: { ...base, hook: 'forward', iifname: from.interfaceName, oifname: to.interfaceName } }];
  const out: { node: string | undefined; packet: NftPacket }[] = [];
  if (from) out.push({ node: from.node, packet: { ...base, hook: 'forward', iifname: from.interfaceName, oifname: UPLINK } });
  if (to) out.push({ node: to.node, packet: { ...base, hook: 'forward', iifname: UPLINK, oifname: to.interfaceName } });
  return out;
}

/** The verdict of the compiled tables for a probe, with the traces. */
export function compiledVerdict(parts: ReadonlyMap<string, TablePart>, probe: Probe): { verdict: Verdict; traces: Trace[] } {
  const traces: Trace[] = [];
  for (const { node, packet } of packetsOf(probe)) {
    const part = node === undefined ? undefined : parts.get(node);
    if (!part) continue;
    const trace = interpret(part, packet);
    traces.push(trace);
    if (trace.verdict === 'drop') return { verdict: 'deny', traces };
  }
  return { verdict: 'allow', traces };
}

/** A probe as a line of a failure message. */
export function describeProbe(probe: Probe): string {
  const peer = (p: Probe['from']) => ('pod' in p ? p.pod.key : p.address);
  const what =
    probe.protocol === 'ICMP'
      ? `ICMP${probe.icmpType !== undefined ? ` ${probe.icmpType}/${probe.icmpCode}` : ''}`
      : `${probe.port}/${probe.protocol}`;
  return `${peer(probe.from)} → ${peer(probe.to)} ${what} IPv${probe.family}`;
}
