// The small cluster the generated policy tests reason about, after Kubernetes' own NetworkPolicy
// e2e suite: pods a, b, c in namespaces x, y, z (label pod=<name>; namespaces labelled ns=<name>
// and, as the API server does, kubernetes.io/metadata.name=<name>), serving ports 80 and 81 over
// TCP and UDP. Each pod names its ports `serve-<port>-<tcp|udp>`, and one more, `web`, differently
// per pod (a: 80/TCP, b: 81/TCP, c: 80/UDP) so that a named port must resolve per pod and per
// protocol. Service accounts: a runs as `front` (tier=front), b as `back` (tier=back), c as
// `default`. Pods are spread over two nodes.
//
// The same description drives the pure model (model.ts), the compiler through its engine, and the
// real-traffic tests (which create these pods and namespaces for real).

export const NAMESPACES = ['x', 'y', 'z'] as const;
export const POD_NAMES = ['a', 'b', 'c'] as const;
export const PORTS = [80, 81] as const;
export const PROTOCOLS = ['TCP', 'UDP'] as const;
export const NODES = ['node-1', 'node-2'] as const;

export type TestProtocol = (typeof PROTOCOLS)[number] | 'SCTP';

export interface TestPort {
  name: string;
  protocol: 'TCP' | 'UDP' | 'SCTP';
  port: number;
}

export interface TestNamespace {
  name: string;
  labels: Record<string, string>;
}

export interface TestServiceAccount {
  namespace: string;
  name: string;
  labels: Record<string, string>;
}

export interface TestPod {
  /** `<namespace>/<name>`. */
  key: string;
  namespace: string;
  name: string;
  labels: Record<string, string>;
  serviceAccount: string;
  ipv4: string;
  /** '' for a pod without IPv6. */
  ipv6: string;
  node: string;
  /** The host side of its interface. */
  interfaceName: string;
  ports: TestPort[];
}

export interface TestCluster {
  namespaces: TestNamespace[];
  serviceAccounts: TestServiceAccount[];
  pods: TestPod[];
}

const WEB: Record<string, TestPort> = {
  a: { name: 'web', protocol: 'TCP', port: 80 },
  b: { name: 'web', protocol: 'TCP', port: 81 },
  c: { name: 'web', protocol: 'UDP', port: 80 },
};

const ACCOUNTS: Record<string, string> = { a: 'front', b: 'back', c: 'default' };

/** The cluster; `nodeOf` places each pod (default: a and b of x and y on node-1, the rest on node-2). */
export function testCluster(nodeOf: (namespace: string, pod: string) => string = defaultPlacement): TestCluster {
  const namespaces = NAMESPACES.map((name) => ({ name, labels: { ns: name, 'kubernetes.io/metadata.name': name } }));
  const serviceAccounts = NAMESPACES.flatMap((namespace): TestServiceAccount[] => [
    { namespace, name: 'front', labels: { tier: 'front' } },
    { namespace, name: 'back', labels: { tier: 'back' } },
    { namespace, name: 'default', labels: {} },
  ]);
  const pods = NAMESPACES.flatMap((namespace, i) =>
    POD_NAMES.map((name, j) => ({
      key: `${namespace}/${name}`,
      namespace,
      name,
      labels: { pod: name },
      serviceAccount: ACCOUNTS[name] as string,
      ipv4: `10.${i + 1}.0.${j + 1}`,
      ipv6: `fd00:${i + 1}::${j + 1}`,
      node: nodeOf(namespace, name),
      interfaceName: `cali${namespace}${name}0000`,
      ports: [
        ...PORTS.flatMap((port) => PROTOCOLS.map((protocol) => ({ name: `serve-${port}-${protocol.toLowerCase()}`, protocol, port }))),
        WEB[name] as TestPort,
      ],
    })),
  );
  return { namespaces, serviceAccounts, pods };
}

function defaultPlacement(namespace: string, pod: string): string {
  return (namespace === 'x' || namespace === 'y') && pod !== 'c' ? 'node-1' : 'node-2';
}

/** Addresses outside the cluster's pods that policies may name (ipBlock, nets) and probes may come from. */
export const OUTSIDE = { ipv4: ['192.168.5.5', '10.9.9.9'], ipv6: ['fd99::5'] } as const;
