// Kubernetes objects and the datastore documents they hold: a custom resource's spec is the
// document; a native kind's object (netplug's own resources) is the document itself, in netplug's
// apiVersion and named by its key; a Node holds the addresses netplug-node publishes, and the
// release it records, as annotations.
import type { NodeSpec } from '../../model/node.ts';
import { API_VERSION, type Entry } from '../store.ts';
import { KEY_ANNOTATION, NODE_ADDRESS_ANNOTATIONS, NODE_VERSION_ANNOTATION, NODES_PREFIX, kindOfKey, type Kind } from './resources.ts';

interface ObjectMeta {
  name: string;
  namespace?: string;
  uid?: string;
  resourceVersion?: string;
  creationTimestamp?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
}

export interface KubeObject {
  metadata: ObjectMeta;
  spec?: unknown;
  status?: unknown;
}

/** The key an object holds: its annotation, or for a native kind's object made without it (by kubectl), the prefix, namespace and name. */
export const keyOf = (kind: Kind, object: KubeObject): string | undefined =>
  object.metadata.annotations?.[KEY_ANNOTATION] ??
  (kind.native ? nativeKey(kind, object.metadata.name, object.metadata.namespace) : undefined);

const nativeKey = (kind: Kind, name: string, namespace: string | undefined) =>
  `${kind.prefix}${kind.namespaced ? `${namespace ?? 'default'}/` : ''}${name}`;

interface NativeDocument {
  metadata?: { labels?: Record<string, string>; annotations?: Record<string, string>; uid?: string };
  spec?: unknown;
  status?: unknown;
}

/** The document an object holds: its spec, or a native kind's object itself (in netplug's apiVersion, named by its key). */
export function documentOf(key: string, object: KubeObject): unknown {
  const found = kindOfKey(key);
  if (!found?.kind.native) return object.spec;
  const { uid, creationTimestamp, labels, annotations = {} } = object.metadata;
  const { [KEY_ANNOTATION]: _key, ...others } = annotations;
  const slash = found.rest.indexOf('/');
  const place = found.kind.namespaced ? { namespace: found.rest.slice(0, slash), name: found.rest.slice(slash + 1) } : { name: found.rest };
  const metadata = {
    ...place,
    ...(uid ? { uid } : {}),
    ...(creationTimestamp ? { creationTimestamp } : {}),
    ...(labels ? { labels } : {}),
    ...(Object.keys(others).length > 0 ? { annotations: others } : {}),
  };
  return {
    kind: found.kind.kind,
    apiVersion: API_VERSION,
    metadata,
    spec: object.spec ?? {},
    ...(object.status ? { status: object.status } : {}),
  };
}

export function resource(
  kind: Kind,
  place: { name: string; labels: Record<string, string>; namespace?: string },
  key: string,
  value: unknown,
  resourceVersion?: string,
) {
  const { name, labels, namespace } = place;
  const apiVersion = `${kind.group}/${kind.version}`;
  if (kind.native) {
    // The key annotation only where the name cannot give the key back; an update names the UID it read (a precondition).
    const document = value as NativeDocument;
    const annotations = {
      ...document.metadata?.annotations,
      ...(key === nativeKey(kind, name, namespace) ? {} : { [KEY_ANNOTATION]: key }),
    };
    const uid = resourceVersion ? document.metadata?.uid : undefined;
    return {
      apiVersion,
      kind: kind.kind,
      metadata: {
        name,
        ...(namespace !== undefined ? { namespace } : {}),
        labels: { ...document.metadata?.labels, ...labels },
        annotations,
        ...(uid ? { uid } : {}),
        ...(resourceVersion ? { resourceVersion } : {}),
      },
      spec: document.spec ?? {},
      ...(document.status ? { status: document.status } : {}),
    };
  }
  return {
    apiVersion,
    kind: kind.kind,
    metadata: { name, labels, annotations: { [KEY_ANNOTATION]: key }, ...(resourceVersion ? { resourceVersion } : {}) },
    spec: value,
  };
}

/**
 * The entry an object watched outside this store holds (store/kubernetes/follow.ts): a Node's, or
 * one of `kind` whose key is under `prefix`; undefined for others.
 */
export function entryOfObject(prefix: string, object: KubeObject): Entry<unknown> | undefined {
  if (prefix === NODES_PREFIX) return nodeEntry(object);
  const kind = kindOfKey(prefix)?.kind;
  const key = kind && keyOf(kind, object);
  if (!key?.startsWith(prefix)) return undefined;
  return { key, value: documentOf(key, object), revision: object.metadata.resourceVersion ?? '' };
}

/** A Node's addresses as the annotations that hold them (null where it has none: a merge patch removes it); nodeEntry reads them back. */
export function nodeAddressAnnotations(spec: NodeSpec | undefined): Record<string, string | null> {
  return {
    [NODE_ADDRESS_ANNOTATIONS.ipv4Address]: spec?.bgp?.ipv4Address ?? null,
    [NODE_ADDRESS_ANNOTATIONS.ipv6Address]: spec?.bgp?.ipv6Address ?? null,
    [NODE_ADDRESS_ANNOTATIONS.ipv4IPIPTunnelAddr]: spec?.bgp?.ipv4IPIPTunnelAddr ?? null,
    [NODE_ADDRESS_ANNOTATIONS.ipv4VXLANTunnelAddr]: spec?.ipv4VXLANTunnelAddr ?? null,
    [NODE_ADDRESS_ANNOTATIONS.vxlanTunnelMACAddr]: spec?.vxlanTunnelMACAddr ?? null,
    [NODE_ADDRESS_ANNOTATIONS.ipv6VXLANTunnelAddr]: spec?.ipv6VXLANTunnelAddr ?? null,
    [NODE_ADDRESS_ANNOTATIONS.vxlanTunnelMACAddrV6]: spec?.vxlanTunnelMACAddrV6 ?? null,
  };
}

export function nodeEntry(node: KubeObject): Entry<unknown> {
  const { name, creationTimestamp, labels = {}, annotations = {}, resourceVersion = '' } = node.metadata;
  // The addresses netplug-node publishes as annotations, in the etcd Node's spec fields.
  const at = (field: keyof typeof NODE_ADDRESS_ANNOTATIONS) => annotations[NODE_ADDRESS_ANNOTATIONS[field]];
  const present = (fields: Record<string, string | undefined>) => Object.fromEntries(Object.entries(fields).filter(([, v]) => v));
  const bgp = present({ ipv4Address: at('ipv4Address'), ipv6Address: at('ipv6Address'), ipv4IPIPTunnelAddr: at('ipv4IPIPTunnelAddr') });
  const spec = {
    ...(Object.keys(bgp).length > 0 ? { bgp } : {}),
    ...present({
      ipv4VXLANTunnelAddr: at('ipv4VXLANTunnelAddr'),
      vxlanTunnelMACAddr: at('vxlanTunnelMACAddr'),
      ipv6VXLANTunnelAddr: at('ipv6VXLANTunnelAddr'),
      vxlanTunnelMACAddrV6: at('vxlanTunnelMACAddrV6'),
    }),
  };
  // Its pod CIDRs (the older spec.podCIDR when it has no list), as the reference's status.podCIDRs.
  const given = node.spec as { podCIDRs?: string[]; podCIDR?: string } | undefined;
  const podCIDRs = given?.podCIDRs ?? (given?.podCIDR ? [given.podCIDR] : []);
  // The release netplug-node records on its Node, as the etcd Node's status.netplugVersion.
  const netplugVersion = annotations[NODE_VERSION_ANNOTATION];
  const status = { ...(podCIDRs.length > 0 ? { podCIDRs } : {}), ...(netplugVersion ? { netplugVersion } : {}) };
  return {
    key: `${NODES_PREFIX}${name}`,
    revision: resourceVersion,
    value: {
      kind: 'Node',
      apiVersion: API_VERSION,
      metadata: { name, creationTimestamp, labels },
      spec,
      ...(Object.keys(status).length > 0 ? { status } : {}),
    },
  };
}
