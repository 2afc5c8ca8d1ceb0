// Kubernetes' own objects in netplug's policy model. A NetworkPolicy (networking.k8s.io/v1) becomes
// a netplug NetworkPolicy in tier default at order 1000 named `knp.default.<name>`: its pods are
// those of its namespace its podSelector matches; each ingress (egress) rule allows traffic from
// (to) any of its peers on any of its ports, so every peer × protocol becomes one Allow rule; a
// rule that cannot be converted is left out and reported (leaving out an Allow opens nothing).
// Peers named by pod and namespace selectors are pods only (Kubernetes' meaning), never the
// network sets that carry the same labels.
// Namespaces and service accounts become the profiles `kns.<ns>` and `ksa.<ns>.<sa>`, which give
// endpoints their labels and allow what no policy decides.
import { API_VERSION } from '../model/entry.ts';
import {
  KUBERNETES_POLICY_ORDER,
  KUBERNETES_POLICY_PREFIX,
  DEFAULT_TIER,
  ENDPOINT_LABELS,
  NAME_LABEL,
  NAMESPACE_LABEL_PREFIX,
  SERVICE_ACCOUNT_LABEL_PREFIX,
  namespaceProfileName,
  serviceAccountProfileName,
  type EntityRule,
  type NetworkPolicyResource,
  type PolicyRule,
  type PolicyType,
  type ProfileResource,
} from '../model/policy.ts';
import { parseNet, parsePort } from '../model/policy-schema.ts';
import { formatSelector } from '../selectors/format.ts';
import { parseSelector } from '../selectors/parse.ts';
import { fromLabelSelector, type LabelSelector } from '../selectors/label-selector.ts';
import { memoized } from './memo.ts';
import type { ProgramIssue } from './program.ts';

/** A NetworkPolicy as the API gives it (what @kubernetes/client-node's V1NetworkPolicy holds; no import of it here). */
export interface KubeNetworkPolicy {
  metadata: { name: string; namespace?: string; uid?: string; resourceVersion?: string; labels?: Record<string, string> };
  spec: {
    podSelector?: LabelSelector | null;
    policyTypes?: string[] | null;
    ingress?: { from?: KubePeer[] | null; ports?: KubePort[] | null }[] | null;
    egress?: { to?: KubePeer[] | null; ports?: KubePort[] | null }[] | null;
  };
}

export interface KubePeer {
  podSelector?: LabelSelector | null;
  namespaceSelector?: LabelSelector | null;
  ipBlock?: { cidr: string; except?: string[] | null } | null;
}

export interface KubePort {
  protocol?: string | null;
  port?: number | string | null;
  endPort?: number | null;
}

const PROTOCOLS = ['TCP', 'UDP', 'SCTP'] as const;
const ORCHESTRATOR_K8S = `${ENDPOINT_LABELS.orchestrator} == "k8s"`;

/** A rule's part that cannot be converted: the rule is left out. */
class Unconvertible extends Error {
  readonly field: string;

  constructor(field: string, message: string) {
    super(message);
    this.field = field;
  }
}

/** The netplug policy a Kubernetes NetworkPolicy stands for, and what of it could not be converted. */
/**
 * A NetworkPolicy as the API serves it, in the shape convertKubernetesPolicy reads. client-node's
 * list deserializes an ingress rule's `from` into `_from` (its model's name) while its watch
 * passes JSON as it is: read as `from` only, a listed policy's peers would be lost and its rules
 * would allow from anywhere.
 */
export function servedKubernetesPolicy(object: unknown): KubeNetworkPolicy {
  const policy = object as KubeNetworkPolicy;
  const ingress = policy.spec?.ingress?.map((rule) => {
    const { _from, ...rest } = rule as typeof rule & { _from?: unknown };
    return { ...rest, from: rule.from ?? (_from as typeof rule.from) };
  });
  return { ...policy, spec: { ...policy.spec, ...(ingress ? { ingress } : {}) } };
}

export function convertKubernetesPolicy(policy: KubeNetworkPolicy): { policy: NetworkPolicyResource; issues: ProgramIssue[] } {
  const issues: ProgramIssue[] = [];
  const namespace = policy.metadata.namespace ?? 'default';
  const spec = policy.spec ?? {};
  const podSelector = policyPodSelector(JSON.stringify(spec.podSelector ?? {}));
  const converted = (direction: 'ingress' | 'egress'): PolicyRule[] => {
    const out: PolicyRule[] = [];
    (spec[direction] ?? []).forEach((rule, i) => {
      const field = `spec.${direction}[${i}]`;
      try {
        out.push(
          ...convertRule(
            direction,
            (direction === 'ingress' ? (rule as { from?: KubePeer[] | null }).from : (rule as { to?: KubePeer[] | null }).to) ?? [],
            rule.ports ?? [],
            field,
          ),
        );
      } catch (err) {
        if (!(err instanceof Unconvertible)) throw err;
        issues.push({ field: err.field, message: `rule left out: ${err.message}` });
      }
    });
    return out;
  };
  const types: PolicyType[] =
    spec.policyTypes && spec.policyTypes.length > 0
      ? (['Ingress', 'Egress'] as const).filter((t) => spec.policyTypes?.includes(t))
      : (spec.egress?.length ?? 0) > 0
        ? ['Ingress', 'Egress']
        : ['Ingress'];
  const ingress = types.includes('Ingress') ? converted('ingress') : [];
  const egress = types.includes('Egress') ? converted('egress') : [];
  return {
    policy: {
      kind: 'NetworkPolicy',
      apiVersion: API_VERSION,
      metadata: {
        name: `${KUBERNETES_POLICY_PREFIX}${policy.metadata.name}`,
        namespace,
        ...(policy.metadata.uid ? { uid: policy.metadata.uid } : {}),
      },
      spec: {
        tier: DEFAULT_TIER,
        order: KUBERNETES_POLICY_ORDER,
        selector: podSelector,
        types,
        ...(types.includes('Ingress') ? { ingress } : {}),
        ...(types.includes('Egress') ? { egress } : {}),
      },
    },
    issues,
  };
}

function convertRule(direction: 'ingress' | 'egress', peers: readonly KubePeer[], ports: readonly KubePort[], field: string): PolicyRule[] {
  const peerList =
    peers.length > 0 ? peers.map((peer, j) => convertPeer(peer, `${field}.${direction === 'ingress' ? 'from' : 'to'}[${j}]`)) : [{}];
  const groups = ports.length > 0 ? portGroups(ports, `${field}.ports`) : [undefined];
  const rules: PolicyRule[] = [];
  for (const peer of peerList) {
    for (const group of groups) {
      const destinationPorts = group?.ports ? { ports: group.ports } : {};
      const rule: PolicyRule = {
        action: 'Allow',
        ...(group ? { protocol: group.protocol } : {}),
        ...(direction === 'ingress' ? { source: peer, destination: destinationPorts } : { destination: { ...peer, ...destinationPorts } }),
      };
      rules.push(rule);
    }
  }
  return rules;
}

function convertPeer(peer: KubePeer, field: string): EntityRule {
  const selector = (given: LabelSelector, at: string) => {
    try {
      return labelSelectorText(JSON.stringify(given), at);
    } catch (err) {
      // The message starts with the field it is about (spec...matchExpressions[0].operator).
      const message = (err as Error).message;
      throw new Unconvertible(/^[^\s:]+/.exec(message)?.[0] ?? at, message);
    }
  };
  if (peer.ipBlock) {
    if (peer.podSelector || peer.namespaceSelector)
      throw new Unconvertible(field, 'ipBlock cannot be given with podSelector or namespaceSelector');
    const cidr = peer.ipBlock.cidr;
    if (typeof cidr !== 'string' || !cidr.includes('/') || !parseNet(cidr))
      throw new Unconvertible(`${field}.ipBlock.cidr`, `${JSON.stringify(cidr)} is not a CIDR`);
    const except = peer.ipBlock.except ?? [];
    except.forEach((text, k) => {
      if (typeof text !== 'string' || !parseNet(text))
        throw new Unconvertible(`${field}.ipBlock.except[${k}]`, `${JSON.stringify(text)} is not a CIDR`);
    });
    return { nets: [cidr], ...(except.length > 0 ? { notNets: [...except] } : {}) };
  }
  if (!peer.podSelector && !peer.namespaceSelector)
    throw new Unconvertible(field, 'a peer needs podSelector, namespaceSelector or ipBlock');
  // Pods only: not the network sets a selector of the same labels would also match.
  const pods = peer.podSelector ? selector(peer.podSelector, `${field}.podSelector`) : 'all()';
  return {
    selector: podsSelector(pods),
    ...(peer.namespaceSelector ? { namespaceSelector: selector(peer.namespaceSelector, `${field}.namespaceSelector`) } : {}),
  };
}

// Thousands of policies repeat the same few label selectors: their texts are kept (memo.ts).
const policyPodSelector = memoized((json) =>
  formatSelector({
    kind: 'and',
    operands: [
      { kind: 'equals', key: ENDPOINT_LABELS.orchestrator, value: 'k8s' },
      fromLabelSelector(JSON.parse(json) as LabelSelector, 'spec.podSelector'),
    ],
  }),
);
const podsSelector = memoized((pods) => formatSelector(parseSelector(`${ORCHESTRATOR_K8S} && (${pods})`)));
const labelSelectorTexts = memoized((json) => formatSelector(fromLabelSelector(JSON.parse(json) as LabelSelector, '')));

/** A label selector's text; a selector that cannot be converted throws naming its field (`at`). */
function labelSelectorText(json: string, at: string): string {
  try {
    return labelSelectorTexts(json);
  } catch {
    // Converted again for the message, which names the field.
    return formatSelector(fromLabelSelector(JSON.parse(json) as LabelSelector, at));
  }
}

/** The ports per protocol (in the order the protocols first appear); a protocol with a port-less entry has no port list. */
function portGroups(ports: readonly KubePort[], field: string): { protocol: (typeof PROTOCOLS)[number]; ports?: (number | string)[] }[] {
  const groups = new Map<(typeof PROTOCOLS)[number], (number | string)[] | undefined>();
  ports.forEach((entry, k) => {
    const at = `${field}[${k}]`;
    const protocol = (entry.protocol ?? 'TCP') as (typeof PROTOCOLS)[number];
    if (!PROTOCOLS.includes(protocol))
      throw new Unconvertible(`${at}.protocol`, `${JSON.stringify(entry.protocol)} must be TCP, UDP or SCTP`);
    let port: number | string | undefined;
    if (entry.port !== undefined && entry.port !== null) {
      const parsed = parsePort(entry.port);
      if (!parsed || (typeof entry.port === 'number' && entry.port < 1))
        throw new Unconvertible(`${at}.port`, `${JSON.stringify(entry.port)} is not a port number or name`);
      if (entry.endPort !== undefined && entry.endPort !== null) {
        if (typeof entry.port !== 'number' || !Number.isInteger(entry.endPort) || entry.endPort < entry.port || entry.endPort > 65535)
          throw new Unconvertible(
            `${at}.endPort`,
            `${JSON.stringify(entry.endPort)} must be a port from port (${JSON.stringify(entry.port)}) to 65535, with a numeric port`,
          );
        port = `${entry.port}:${entry.endPort}`;
      } else port = typeof entry.port === 'number' ? entry.port : 'name' in parsed ? parsed.name : Number(entry.port);
    }
    if (!groups.has(protocol)) groups.set(protocol, []);
    const list = groups.get(protocol);
    if (port === undefined) groups.set(protocol, undefined);
    else if (list) list.push(port);
  });
  return [...groups].map(([protocol, list]) => (list ? { protocol, ports: list } : { protocol }));
}

/** A namespace as the profile `kns.<name>`: its labels (prefixed `pcns.`) for endpoints and network sets in it; allows all. */
export function namespaceProfile(namespace: { metadata: { name: string; labels?: Record<string, string> | null } }): ProfileResource {
  const name = namespace.metadata.name;
  return profile(namespaceProfileName(name), NAMESPACE_LABEL_PREFIX, name, namespace.metadata.labels ?? {});
}

/** A service account as the profile `ksa.<ns>.<name>`: its labels (prefixed `pcsa.`) for its pods; allows all. */
export function serviceAccountProfile(account: {
  metadata: { name: string; namespace?: string; labels?: Record<string, string> | null };
}): ProfileResource {
  const { name, namespace = 'default' } = account.metadata;
  return profile(serviceAccountProfileName(namespace, name), SERVICE_ACCOUNT_LABEL_PREFIX, name, account.metadata.labels ?? {});
}

function profile(name: string, prefix: string, ownName: string, labels: Record<string, string>): ProfileResource {
  const labelsToApply: Record<string, string> = {};
  for (const [key, value] of Object.entries(labels)) labelsToApply[`${prefix}${key}`] = value;
  labelsToApply[`${prefix}${NAME_LABEL}`] = ownName;
  return {
    kind: 'Profile',
    apiVersion: API_VERSION,
    metadata: { name },
    spec: { labelsToApply, ingress: [{ action: 'Allow' }], egress: [{ action: 'Allow' }] },
  };
}
