// npm run bench:policy, first part (the second is bench/policy.ts, the agent enforcing): the policy compiler's costs at a large cluster's size, in
// this process (no kernel): 1,000 policies (Kubernetes NetworkPolicies and netplug ones) over
// 10,000 endpoints in 100 namespaces on 91 nodes (~110 on the compiled node). Measures the full
// compile (every input fed, then the whole part built: what a resync costs before the write), a
// membership change (a pod added or relabelled elsewhere: element changes only), a local pod
// added (chains: a new part), a policy added, and the heap held, in CPU time of this process.
// Writes bench/results/policy-<policies>.json.
import { writeFileSync } from 'node:fs';

import { PolicyEngine } from '../ts/policy/engine.ts';
import type { EndpointInput } from '../ts/policy/endpoints.ts';
import { convertKubernetesPolicy, namespaceProfile, serviceAccountProfile, type KubeNetworkPolicy } from '../ts/policy/kubernetes.ts';
import type { NetworkPolicyResource } from '../ts/model/policy.ts';

const NAMESPACES = 100;
const PODS_PER_NAMESPACE = 100;
const NODES = 91;
const POLICIES = Number(process.argv[2] ?? 1000);
const APPS = 10;
const OPS = 500;

const percentile = (samples: number[], p: number) => {
  const sorted = [...samples].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] as number;
};
// CPU time of this process (user + system): wall time on a shared, loaded machine says little.
const cpu = () => {
  const { user, system } = process.cpuUsage();
  return BigInt(user + system) * 1000n;
};
const ms = (start: bigint) => Number(cpu() - start) / 1e6;

function endpoint(i: number, extra: Partial<EndpointInput> = {}): EndpointInput {
  const ns = `ns${i % NAMESPACES}`;
  const node = `node-${i % NODES}`;
  return {
    key: `${ns}/pod${i}`,
    namespace: ns,
    name: `pod${i}`,
    labels: { app: `app${i % APPS}`, ...(i % 7 === 0 ? { role: 'db' } : {}) },
    addresses: [`10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`],
    ports: [{ name: 'http', protocol: 'TCP', port: 8080 }],
    node,
    ...(node === 'node-0' ? { interfaceName: `cali${i.toString(16).padStart(11, '0')}` } : {}),
    ...extra,
  };
}

/** Kubernetes policies of three common shapes, and one netplug policy in ten, all different. */
function policies(): NetworkPolicyResource[] {
  const out: NetworkPolicyResource[] = [];
  for (let i = 0; i < POLICIES; i++) {
    const namespace = `ns${i % NAMESPACES}`;
    if (i % 10 === 9) {
      out.push({
        kind: 'GlobalNetworkPolicy',
        apiVersion: 'projectnet.org/v3',
        metadata: { name: `gnp${i}` },
        spec: {
          tier: 'default',
          order: i,
          selector: `app == "app${i % APPS}"`,
          types: ['Ingress', 'Egress'],
          ingress: [
            { action: 'Deny', protocol: 'TCP', source: { nets: [`192.168.${i % 256}.0/24`] }, destination: { ports: [22] } },
            { action: 'Pass', source: { namespaceSelector: `team == "t${i % 5}"` } },
          ],
          egress: [{ action: 'Allow', destination: { selector: 'role == "db"' } }],
        },
      });
      continue;
    }
    const kube: KubeNetworkPolicy = {
      metadata: { name: `np${i}`, namespace },
      spec: {
        podSelector: { matchLabels: { app: `app${i % APPS}` } },
        ingress: [
          {
            from: [
              { podSelector: { matchLabels: { app: `app${(i + 1) % APPS}` } } },
              { namespaceSelector: { matchLabels: { team: `t${i % 5}` } } },
            ],
            ports: [{ port: 80 }, { port: 443 }, { port: 'http' }],
          },
          ...(i % 3 === 0 ? [{ from: [{ podSelector: { matchLabels: { role: 'db' } } }] }] : []),
        ],
        ...(i % 2 === 0 ? { egress: [{ to: [{ ipBlock: { cidr: '10.0.0.0/8', except: [`10.${i % 200}.0.0/16`] } }] }] } : {}),
      },
    };
    out.push(convertKubernetesPolicy(kube).policy);
  }
  return out;
}

function build(): { engine: PolicyEngine; seconds: Record<string, number> } {
  const engine = new PolicyEngine({ nodeName: 'node-0', families: [4] });
  const seconds: Record<string, number> = {};
  let start = cpu();
  for (let n = 0; n < NAMESPACES; n++) {
    engine.upsertProfile(namespaceProfile({ metadata: { name: `ns${n}`, labels: { team: `t${n % 5}` } } }));
    engine.upsertProfile(serviceAccountProfile({ metadata: { name: 'default', namespace: `ns${n}` } }));
  }
  for (let i = 0; i < NAMESPACES * PODS_PER_NAMESPACE; i++) engine.upsertEndpoint(endpoint(i));
  seconds['endpoints fed'] = ms(start) / 1000;
  start = cpu();
  for (const policy of policies()) engine.upsertPolicy(policy);
  seconds['policies fed'] = ms(start) / 1000;
  start = cpu();
  engine.flush();
  const part = engine.part();
  seconds['flush and part'] = ms(start) / 1000;
  void part;
  return { engine, seconds };
}

const wallStart = process.hrtime.bigint();
const total = cpu();
const { engine, seconds } = build();
const compileSeconds = ms(total) / 1000;
const compileWallSeconds = Number(process.hrtime.bigint() - wallStart) / 1e9;
const part = engine.part();
const rules = (part.chains ?? []).reduce((n, c) => n + (c.rules?.length ?? 0), 0);
const elements = (part.sets ?? []).reduce((n, s) => n + (s.elements?.length ?? 0), 0);
global.gc?.();
const heapMiB = process.memoryUsage().heapUsed / 2 ** 20;

/** Per operation: the change, then flush (and part() when structural). */
function timed(count: number, operation: (i: number) => void): { p50: number; p99: number; structural: number } {
  const samples: number[] = [];
  let structural = 0;
  for (let i = 0; i < count; i++) {
    const start = cpu();
    operation(i);
    const update = engine.flush();
    if (update.structural) {
      structural++;
      engine.part();
    }
    samples.push(ms(start));
  }
  return { p50: percentile(samples, 50), p99: percentile(samples, 99), structural };
}

const base = NAMESPACES * PODS_PER_NAMESPACE;
const results = {
  size: {
    endpoints: base,
    localEndpoints: engine.stats().localEndpoints,
    policies: POLICIES,
    activePolicies: engine.stats().activePolicies,
    chains: part.chains?.length ?? 0,
    rules,
    sets: part.sets?.length ?? 0,
    setElements: elements,
    partJsonMiB: JSON.stringify(part).length / 2 ** 20,
  },
  fullCompileCpuSeconds: compileSeconds,
  fullCompileWallSeconds: compileWallSeconds,
  fullCompileSteps: seconds,
  heapMiB,
  // A pod elsewhere carrying role=db: one set shared by every policy naming role == "db".
  remotePodAdded: timed(OPS, (i) =>
    engine.upsertEndpoint(endpoint(base + i * 7 * NODES + 1, { labels: { app: 'app1', role: 'db' }, node: 'node-5' })),
  ),
  remotePodRelabelled: timed(OPS, (i) => engine.upsertEndpoint(endpoint(i * NODES + 1, { labels: { app: `app${(i + 3) % APPS}` } }))),
  remotePodRemoved: timed(OPS, (i) => engine.removeEndpoint(`ns${(base + i * 7 * NODES + 1) % NAMESPACES}/pod${base + i * 7 * NODES + 1}`)),
  localPodAdded: timed(50, (i) =>
    engine.upsertEndpoint(endpoint(base * 2 + i, { node: 'node-0', interfaceName: `calinew${i.toString().padStart(8, '0')}` })),
  ),
  policyAdded: timed(50, (i) =>
    engine.upsertPolicy(
      convertKubernetesPolicy({
        metadata: { name: `new${i}`, namespace: `ns${(i * NODES) % NAMESPACES}` },
        spec: {
          podSelector: { matchLabels: { app: `app${i % APPS}` } },
          ingress: [{ from: [{ podSelector: { matchLabels: { app: 'app3' } } }], ports: [{ port: 8443 }] }],
        },
      }).policy,
    ),
  ),
};
console.log(JSON.stringify(results, null, 2));
writeFileSync(new URL(`./results/policy-${POLICIES}.json`, import.meta.url), `${JSON.stringify(results, null, 2)}\n`);
