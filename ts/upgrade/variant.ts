// Which of the release's manifests a manifest install came from, read from its objects: the
// datastore, the IPAM and what carries pods between nodes. The same reading serves the live
// cluster (detect.ts) and the manifest an upgrade is given, so that an upgrade refuses a manifest
// of another kind: applied over an etcd install, netplug.yaml would move netplug-node to the
// Kubernetes datastore mid-upgrade (every address forgotten), and over a flannel install it would
// start routing pods itself. Changing the datastore is `netplugctl datastore migrate`'s work.
import type { Json } from './kube.ts';

export interface Variant {
  datastore: 'kubernetes' | 'etcdv3';
  ipam: 'netplug-ipam' | 'host-local' | 'unknown';
  /** netplug routes pods between nodes; flannel (a container of netplug-node) does; or the cluster does (policy only). */
  networking: 'netplug' | 'flannel' | 'none';
}

const NODE_CONTAINER = 'netplug-node';

/** The variant of the netplug-node DaemonSet and the netplug-config ConfigMap (manifest installs). */
export function variantOf(daemonSet: Json | undefined, config: Json | undefined): Variant {
  const pod = daemonSet?.spec?.template?.spec ?? {};
  const containers: Json[] = pod.containers ?? [];
  const agent = containers.find((c) => c.name === NODE_CONTAINER) ?? {};
  const env = new Map<string, string>(
    (agent.env ?? []).filter((e: Json) => typeof e.value === 'string').map((e: Json) => [e.name, e.value]),
  );
  const datastore = env.get('DATASTORE_TYPE') === 'etcdv3' || config?.data?.etcd_endpoints !== undefined ? 'etcdv3' : 'kubernetes';
  const flannel = containers.some((c) => c.name !== NODE_CONTAINER && /flannel/.test(`${c.name} ${c.image ?? ''}`));
  const networking = flannel ? 'flannel' : env.get('NETPLUG_NETWORKING_BACKEND') === 'none' ? 'none' : 'netplug';
  return { datastore, ipam: ipamOfTemplate(config?.data?.cni_network_config), networking };
}

/** The IPAM of a conflist template; it has placeholders that are not JSON (__CNI_MTU__), so it is read as text. */
export function ipamOfTemplate(template: string | undefined): Variant['ipam'] {
  if (!template) return 'unknown';
  const type = /"ipam"\s*:\s*\{[^{}]*?"type"\s*:\s*"([^"]+)"/s.exec(template)?.[1];
  return type === 'host-local' ? 'host-local' : type === 'netplug-ipam' ? 'netplug-ipam' : 'unknown';
}

/** The release's manifest of `variant`. */
export function manifestFileOf(variant: Variant): string {
  const etcd = variant.datastore === 'etcdv3' ? '-etcd' : '';
  if (variant.networking === 'flannel') return `netplug-flannel${etcd}.yaml`;
  if (variant.networking === 'none') return 'netplug-policy-only.yaml';
  if (variant.datastore === 'etcdv3') return 'netplug-etcd.yaml';
  return variant.ipam === 'host-local' ? 'netplug-host-local.yaml' : 'netplug.yaml';
}

/** The variant of a manifest's objects: its netplug-node DaemonSet and netplug-config ConfigMap; undefined without that DaemonSet. */
export function variantOfObjects(objects: readonly Json[]): Variant | undefined {
  const named = (kind: string, name: string) => objects.find((o) => o?.kind === kind && o.metadata?.name === name);
  const daemonSet = named('DaemonSet', NODE_CONTAINER);
  return daemonSet ? variantOf(daemonSet, named('ConfigMap', 'netplug-config')) : undefined;
}

const WORDS = {
  datastore: { kubernetes: 'the Kubernetes datastore', etcdv3: 'the etcd datastore' },
  networking: { netplug: 'netplug routing pods between nodes', flannel: 'flannel routing pods between nodes', none: 'policy only' },
};

/**
 * Why a manifest of variant `given` cannot upgrade an install of variant `installed`, in one
 * sentence naming the file to give; undefined when they match (an IPAM one cannot read is not compared).
 */
export function variantMismatch(installed: Variant, given: Variant): string | undefined {
  const differences: string[] = [];
  if (installed.datastore !== given.datastore)
    differences.push(`${WORDS.datastore[given.datastore]}, not ${WORDS.datastore[installed.datastore]}`);
  if (installed.ipam !== given.ipam && installed.ipam !== 'unknown' && given.ipam !== 'unknown')
    differences.push(`IPAM ${given.ipam}, not ${installed.ipam}`);
  if (installed.networking !== given.networking)
    differences.push(`${WORDS.networking[given.networking]}, not ${WORDS.networking[installed.networking]}`);
  if (differences.length === 0) return undefined;
  const migrate = installed.datastore !== given.datastore ? '; moving between datastores is netplugctl datastore migrate' : '';
  return `the manifest given is of another kind than the install (${differences.join('; ')}): give the release's ${manifestFileOf(installed)} with your edits${migrate}`;
}
