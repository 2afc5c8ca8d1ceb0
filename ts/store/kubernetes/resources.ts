// Where each datastore key lives in the Kubernetes API: the custom resource kind its prefix maps
// to (manifests in deploy/crds/: netplug's own kinds in crd.projectnet.org/v1, the network policy
// resources users write in projectnet.org/v3), the object's namespace and name, and labels that let
// a prefix read ask the API server for just the objects under it. The key itself is kept in an
// annotation where the name cannot give it back, so names need not be reversible and every read can
// check it exactly.
import { createHash } from 'node:crypto';

export const GROUP = 'crd.projectnet.org';
export const VERSION = 'v1';
export const KEY_ANNOTATION = 'projectnet.org/key';
const NODE_LABEL = 'projectnet.org/node';
const FAMILY_LABEL = 'projectnet.org/ip-family';

const RESOURCES = '/netplug/resources/v3/projectnet.org/';
const IPAM = '/netplug/ipam/v2/';

export interface Kind {
  /** Keys under this prefix are objects of this kind. */
  prefix: string;
  kind: string;
  plural: string;
  /** The API group and version serving the kind. */
  group: string;
  version: string;
  /**
   * A namespaced kind: its keys' rest is `<namespace>/<name>`, its objects live in that namespace
   * (a prefix read of `<namespace>/` lists that namespace only).
   */
  namespaced?: true;
  /** The object's name, namespace and labels from the key's rest (after `prefix`). */
  place(rest: string): { name: string; labels: Record<string, string>; namespace?: string };
  /** The label selector that narrows a read of `rest…` (a prefix of rests), if any. */
  selector(restPrefix: string): string | undefined;
  /**
   * The object is the document itself as kubectl shows it (metadata.labels, spec, status), not a
   * wrapper holding the document in spec: for the kinds users write with kubectl (host endpoints,
   * the controllers' configuration, network policy). An object made without the key annotation
   * has the key `prefix + name` (`prefix + namespace/name` for a namespaced kind).
   */
  native?: true;
}

/** The group and version of the network policy resources (what users write: `apiVersion: projectnet.org/v3`). */
export const POLICY_GROUP = 'projectnet.org';
const POLICY_VERSION = 'v3';

/** The nodes prefix maps to the cluster's own Node objects (read-only): their labels are what pool node selectors match. */
export const NODES_PREFIX = `${RESOURCES}nodes/`;

/**
 * Where a Node's addresses (the etcd datastore's Node spec, ts/model/node.ts NodeSpec) live on the
 * Kubernetes datastore: annotations netplug-node writes on its own Node, named as the reference's.
 */
export const NODE_ADDRESS_ANNOTATIONS = {
  ipv4Address: 'projectnet.org/IPv4Address',
  ipv6Address: 'projectnet.org/IPv6Address',
  ipv4IPIPTunnelAddr: 'projectnet.org/IPv4IPIPTunnelAddr',
  ipv4VXLANTunnelAddr: 'projectnet.org/IPv4VXLANTunnelAddr',
  vxlanTunnelMACAddr: 'projectnet.org/VXLANTunnelMACAddr',
  ipv6VXLANTunnelAddr: 'projectnet.org/IPv6VXLANTunnelAddr',
  vxlanTunnelMACAddrV6: 'projectnet.org/VXLANTunnelMACAddrV6',
} as const;

/**
 * The release netplug-node runs, which it records on its own Node (ts/node/startup/record-version.ts):
 * the etcd datastore's Node status.netplugVersion. The reference records no such thing, so the name
 * is netplug's own, lower-case as Kubernetes' own annotations are.
 */
export const NODE_VERSION_ANNOTATION = 'projectnet.org/netplug-version';

const family = (segment: string | undefined) => (segment === 'ipv4' ? '4' : segment === 'ipv6' ? '6' : undefined);

export const KINDS: readonly Kind[] = [
  {
    prefix: `${RESOURCES}ippools/`,
    kind: 'IPPool',
    plural: 'ippools',
    group: GROUP,
    version: VERSION,
    place: (rest) => ({ name: objectName(rest), labels: {} }),
    selector: () => undefined,
  },
  {
    // Only `default`: which release runs the cluster (ts/model/cluster-information.ts).
    prefix: `${RESOURCES}clusterinformations/`,
    kind: 'ClusterInformation',
    plural: 'clusterinformations',
    group: GROUP,
    version: VERSION,
    place: (rest) => ({ name: objectName(rest), labels: {} }),
    selector: () => undefined,
  },
  {
    prefix: `${RESOURCES}hostendpoints/`,
    kind: 'HostEndpoint',
    plural: 'hostendpoints',
    group: GROUP,
    version: VERSION,
    place: (rest) => ({ name: objectName(rest), labels: {} }),
    selector: () => undefined,
    native: true,
  },
  {
    // Only `default`: netplug-kube-controllers' configuration (ts/controllers/auto-host-endpoints*.ts).
    prefix: `${RESOURCES}kubecontrollersconfigurations/`,
    kind: 'KubeControllersConfiguration',
    plural: 'kubecontrollersconfigurations',
    group: GROUP,
    version: VERSION,
    place: (rest) => ({ name: objectName(rest), labels: {} }),
    selector: () => undefined,
    native: true,
  },
  {
    // `<namespace>/<name>`: namespaces have no dots, so `<namespace>.<name>` is unambiguous.
    prefix: `${RESOURCES}workloadendpoints/`,
    kind: 'WorkloadEndpoint',
    plural: 'workloadendpoints',
    group: GROUP,
    version: VERSION,
    place: (rest) => ({ name: objectName(rest.replace('/', '.')), labels: {} }),
    selector: () => undefined,
  },
  {
    // `ipv4/block/10.0.0.0-26` → `10.0.0.0-26`
    prefix: `${IPAM}assignment/`,
    kind: 'IPAMBlock',
    plural: 'ipamblocks',
    group: GROUP,
    version: VERSION,
    place: (rest) => {
      const [fam, , cidr = ''] = rest.split('/');
      return { name: objectName(cidr), labels: labels({ [FAMILY_LABEL]: family(fam) }) };
    },
    selector: (restPrefix) => selector({ [FAMILY_LABEL]: family(restPrefix.split('/')[0]) }),
  },
  {
    // `<node>/ipv4/block/10.0.0.0-26` → `<node>-10.0.0.0-26`: a CIDR's fixed shape makes the split unambiguous.
    prefix: `${IPAM}host/`,
    kind: 'BlockAffinity',
    plural: 'blockaffinities',
    group: GROUP,
    version: VERSION,
    place: (rest) => {
      const [node = '', fam, , cidr = ''] = rest.split('/');
      return { name: objectName(`${node}-${cidr}`), labels: labels({ [NODE_LABEL]: labelValue(node), [FAMILY_LABEL]: family(fam) }) };
    },
    selector: (restPrefix) => {
      const [node, fam] = restPrefix.split('/');
      return restPrefix.includes('/') ? selector({ [NODE_LABEL]: labelValue(node ?? ''), [FAMILY_LABEL]: family(fam) }) : undefined;
    },
  },
  {
    prefix: `${IPAM}handle/`,
    kind: 'IPAMHandle',
    plural: 'ipamhandles',
    group: GROUP,
    version: VERSION,
    place: (rest) => ({ name: objectName(rest), labels: {} }),
    selector: () => undefined,
  },
  {
    // `<node>/<handle>`
    prefix: `${IPAM}pending/`,
    kind: 'IPAMPendingRequest',
    plural: 'ipampendingrequests',
    group: GROUP,
    version: VERSION,
    place: (rest) => {
      const node = rest.slice(0, rest.indexOf('/'));
      return { name: objectName(rest, true), labels: labels({ [NODE_LABEL]: labelValue(node) }) };
    },
    selector: (restPrefix) =>
      restPrefix.includes('/') ? selector({ [NODE_LABEL]: labelValue(restPrefix.slice(0, restPrefix.indexOf('/'))) }) : undefined,
  },
  ...policyKind('networkpolicies', 'NetworkPolicy', true),
  ...policyKind('globalnetworkpolicies', 'GlobalNetworkPolicy', false),
  ...policyKind('networksets', 'NetworkSet', true),
  ...policyKind('globalnetworksets', 'GlobalNetworkSet', false),
  ...policyKind('tiers', 'Tier', false),
];

/** A network policy kind: native, in projectnet.org/v3, namespaced or not. */
function policyKind(plural: string, kind: string, namespaced: boolean): Kind[] {
  return [
    {
      prefix: `${RESOURCES}${plural}/`,
      kind,
      plural,
      group: POLICY_GROUP,
      version: POLICY_VERSION,
      ...(namespaced ? { namespaced: true as const } : {}),
      place: (rest) => {
        if (!namespaced) return { name: objectName(rest), labels: {} };
        const slash = rest.indexOf('/');
        return { namespace: rest.slice(0, slash), name: objectName(rest.slice(slash + 1)), labels: {} };
      },
      selector: () => undefined,
      native: true,
    },
  ];
}

/** The kind a key belongs to, and the key's rest. */
export function kindOfKey(key: string): { kind: Kind; rest: string } | undefined {
  const kind = KINDS.find((k) => key.startsWith(k.prefix));
  return kind && { kind, rest: key.slice(kind.prefix.length) };
}

/** The kinds a prefix read touches: one (prefix inside a kind), or several (a prefix above them). */
export function kindsOfPrefix(prefix: string): { kind: Kind; restPrefix: string }[] {
  const inside = kindOfKey(prefix);
  if (inside) return [{ kind: inside.kind, restPrefix: inside.rest }];
  return KINDS.filter((k) => k.prefix.startsWith(prefix)).map((kind) => ({ kind, restPrefix: '' }));
}

const NAME = /^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/;

/**
 * A valid object name for `text`: itself when it is one, else its lower-cased, cleaned form with
 * a hash of the original appended (so distinct keys never share a name; the hash reads UTF-8, in
 * which lone UTF-16 surrogates all become U+FFFD, but no validated name or key carries one).
 */
export function objectName(text: string, alwaysHash = false): string {
  if (!alwaysHash && NAME.test(text)) return text;
  const clean = text
    .toLowerCase()
    .replace(/[^a-z0-9.-]+/g, '-')
    .replace(/^[^a-z0-9]+/, '')
    .slice(0, 230)
    .replace(/[^a-z0-9]+$/, '');
  return `${clean ? `${clean}-` : ''}${hash(text)}`;
}

/** Node names can be longer than a label value may be. */
function labelValue(text: string): string {
  return text.length <= 63 ? text : `h-${hash(text)}`;
}

const hash = (text: string) => createHash('sha256').update(text).digest('hex').slice(0, 16);

function labels(entries: Record<string, string | undefined>): Record<string, string> {
  return Object.fromEntries(Object.entries(entries).filter((e): e is [string, string] => e[1] !== undefined && e[1] !== ''));
}

function selector(entries: Record<string, string | undefined>): string | undefined {
  const parts = Object.entries(labels(entries)).map(([k, v]) => `${k}=${v}`);
  return parts.length > 0 ? parts.join(',') : undefined;
}
