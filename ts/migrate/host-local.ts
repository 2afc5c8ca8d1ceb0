// The upgrade's extra steps for host-local installs, on a live manifest install, as functions
// netplugctl upgrade and `netplugctl migrate host-local` call: is this a
// host-local install (the conflist template's ipam.type), and if so set USE_POD_CIDR=true on the
// netplug-node container and take the init container upgrade-ipam off the DaemonSet. upgrade-ipam
// moves host-local's allocations into netplug-ipam and deletes host-local's files, so host-local
// hands out again addresses running pods hold (calico#11702). Both changes go in one JSON patch:
// one rollout, and no node pod started in between runs upgrade-ipam again (setting USE_POD_CIDR
// first, as a separate change, would roll every node pod through upgrade-ipam once more).
// The patch tests what it read (the resourceVersion, the names at their indexes) before it changes
// anything; a DaemonSet changed meanwhile is read again. Deleting upgrade-ipam from the manifest
// is not enough on a live install: kubectl create owns it, so a server-side apply keeps it.
import * as k8s from '@kubernetes/client-node';

export const NODE_DAEMONSET = 'netplug-node';
export const NODE_CONTAINER = 'netplug-node';
export const UPGRADE_IPAM = 'upgrade-ipam';
export const USE_POD_CIDR = 'USE_POD_CIDR';
/** Where the manifests keep the conflist template when the DaemonSet does not say. */
const TEMPLATE_CONFIG_MAP = { name: 'netplug-config', key: 'cni_network_config' };
const OPERATOR_LABEL = 'app.kubernetes.io/managed-by';
const FIELD_MANAGER = 'netplugctl';
const ATTEMPTS = 5;

/** A refusal or an API failure, in one line. */
export class HostLocalError extends Error {
  override readonly name = 'HostLocalError';
}

interface HostLocalInstall {
  namespace: string;
  /** The DaemonSet's resourceVersion as read. */
  resourceVersion: string;
  /** Where the conflist template was read: `ConfigMap kube-system/netplug-config key cni_network_config`. */
  templateSource: string;
  /** The template's ipam.type ("host-local", "netplug-ipam", ...). */
  ipamType: string | undefined;
  hostLocal: boolean;
  /** netplug-operator renders this DaemonSet (it sets USE_POD_CIDR itself and has no upgrade-ipam). */
  operatorManaged: boolean;
  usePodCidr: boolean;
  /** The init container upgrade-ipam: its index and image. */
  upgradeIpam: { index: number; image: string } | undefined;
}

/** What `migrate` did (or would do, on a dry run). */
export interface HostLocalResult {
  install: HostLocalInstall;
  removedUpgradeIpam: { image: string } | undefined;
  setUsePodCidr: boolean;
  dryRun: boolean;
}

/**
 * Removes upgrade-ipam and sets USE_POD_CIDR=true, in one guarded JSON patch; nothing when both
 * are so already. Refused (HostLocalError, nothing changed) unless the install is a host-local
 * manifest install. `dryRun`: the server checks the patch and keeps nothing.
 */
export async function migrateHostLocal(
  kube: k8s.KubeConfig,
  namespace: string,
  options: { dryRun?: boolean } = {},
): Promise<HostLocalResult> {
  const apps = kube.makeApiClient(k8s.AppsV1Api);
  for (let attempt = 1; ; attempt++) {
    const daemonSet = await readDaemonSet(kube, namespace);
    const install = describeInstall(daemonSet, namespace, await readTemplate(kube, namespace, daemonSet));
    refuseUnlessHostLocal(install);
    const patch = hostLocalPatch(daemonSet);
    const result = {
      install,
      removedUpgradeIpam: install.upgradeIpam ? { image: install.upgradeIpam.image } : undefined,
      setUsePodCidr: !install.usePodCidr,
      dryRun: options.dryRun === true,
    };
    if (patch.length === 0) return result;
    try {
      await apps.patchNamespacedDaemonSet(
        { name: NODE_DAEMONSET, namespace, body: patch, fieldManager: FIELD_MANAGER, ...(options.dryRun ? { dryRun: 'All' } : {}) },
        k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.JsonPatch),
      );
      return result;
    } catch (err) {
      // A failed test (422) or conflict: the DaemonSet changed since it was read. Read it again.
      const changed = statusOf(err) === 422 || statusOf(err) === 409;
      if (changed && attempt < ATTEMPTS) continue;
      if (changed)
        throw new HostLocalError(
          `DaemonSet ${namespace}/${NODE_DAEMONSET} changed under each of ${ATTEMPTS} guarded patches (${messageOf(err)}); nothing changed, try again`,
        );
      throw apiFailure(`patching DaemonSet ${namespace}/${NODE_DAEMONSET}`, err);
    }
  }
}

/**
 * The JSON patch that removes upgrade-ipam and sets USE_POD_CIDR=true on `daemonSet` as read, guarded by
 * its resourceVersion and the names at the indexes it changes; empty when there is nothing to do.
 */
export function hostLocalPatch(daemonSet: k8s.V1DaemonSet): { op: string; path: string; value?: unknown }[] {
  const pod = daemonSet.spec?.template.spec;
  if (!pod) return [];
  const patch: { op: string; path: string; value?: unknown }[] = [];
  const guard = { op: 'test', path: '/metadata/resourceVersion', value: daemonSet.metadata?.resourceVersion };
  const init = pod.initContainers ?? [];
  const at = init.findIndex((container) => container.name === UPGRADE_IPAM);
  if (at >= 0) {
    patch.push({ op: 'test', path: `/spec/template/spec/initContainers/${at}/name`, value: UPGRADE_IPAM });
    patch.push({ op: 'remove', path: `/spec/template/spec/initContainers/${at}` });
  }
  const index = pod.containers.findIndex((container) => container.name === NODE_CONTAINER);
  const agent = pod.containers[index];
  if (!agent) return patch.length > 0 ? [guard, ...patch] : [];
  const base = `/spec/template/spec/containers/${index}`;
  const env = agent.env ?? [];
  const current = env.findIndex((variable) => variable.name === USE_POD_CIDR);
  const wanted = { name: USE_POD_CIDR, value: 'true' };
  if (current >= 0 && env[current]?.value === 'true' && !env[current]?.valueFrom) return patch.length > 0 ? [guard, ...patch] : [];
  patch.push({ op: 'test', path: `${base}/name`, value: NODE_CONTAINER });
  if (current >= 0) {
    patch.push({ op: 'test', path: `${base}/env/${current}/name`, value: USE_POD_CIDR });
    patch.push({ op: 'replace', path: `${base}/env/${current}`, value: wanted });
  } else {
    // The resourceVersion's test keeps a USE_POD_CIDR added meanwhile from being added twice.
    patch.push(env.length > 0 ? { op: 'add', path: `${base}/env/-`, value: wanted } : { op: 'add', path: `${base}/env`, value: [wanted] });
  }
  return [guard, ...patch];
}

function describeInstall(
  daemonSet: k8s.V1DaemonSet,
  namespace: string,
  template: { source: string; text: string | undefined },
): HostLocalInstall {
  const pod = daemonSet.spec?.template.spec;
  const agent = pod?.containers.find((container) => container.name === NODE_CONTAINER);
  const variable = agent?.env?.find((entry) => entry.name === USE_POD_CIDR);
  const at = (pod?.initContainers ?? []).findIndex((container) => container.name === UPGRADE_IPAM);
  const ipamType = ipamTypeOf(template.text);
  return {
    namespace,
    resourceVersion: daemonSet.metadata?.resourceVersion ?? '',
    templateSource: template.source,
    ipamType,
    hostLocal: ipamType === 'host-local',
    operatorManaged: daemonSet.metadata?.labels?.[OPERATOR_LABEL] === 'netplug-operator',
    usePodCidr: variable?.value?.trim().toLowerCase() === 'true' && !variable.valueFrom,
    upgradeIpam: at >= 0 ? { index: at, image: pod?.initContainers?.[at]?.image ?? '' } : undefined,
  };
}

function refuseUnlessHostLocal(install: HostLocalInstall): void {
  const daemonSet = `DaemonSet ${install.namespace}/${NODE_DAEMONSET}`;
  if (install.operatorManaged)
    throw new HostLocalError(
      `${daemonSet} is managed by netplug-operator, which sets USE_POD_CIDR itself for cni.ipam.type HostLocal and runs no upgrade-ipam: nothing to do here`,
    );
  if (!install.hostLocal)
    throw new HostLocalError(
      `not a host-local install: the conflist template (${install.templateSource}) has ipam.type ${install.ipamType === undefined ? 'missing' : `"${install.ipamType}"`}; nothing changed`,
    );
}

/**
 * The ipam.type of the netplug plugin in a conflist (or netconf) template. Placeholders
 * (`__CNI_MTU__`, unquoted; `"__KUBECONFIG_FILEPATH__"`) become 0 so the template parses.
 */
export function ipamTypeOf(template: string | undefined): string | undefined {
  if (!template) return undefined;
  type Plugin = { type?: unknown; ipam?: { type?: unknown } };
  let parsed: Plugin & { plugins?: Plugin[] };
  try {
    parsed = JSON.parse(template.replace(/__[A-Z0-9_]+__/g, '0'));
  } catch {
    return undefined;
  }
  const plugins = Array.isArray(parsed.plugins) ? parsed.plugins : [parsed];
  const netplug = plugins.find((plugin) => plugin?.type === 'netplug') ?? plugins.find((plugin) => plugin?.ipam);
  const type = netplug?.ipam?.type;
  return typeof type === 'string' ? type : undefined;
}

async function readDaemonSet(kube: k8s.KubeConfig, namespace: string): Promise<k8s.V1DaemonSet> {
  try {
    return await kube.makeApiClient(k8s.AppsV1Api).readNamespacedDaemonSet({ name: NODE_DAEMONSET, namespace });
  } catch (err) {
    if (statusOf(err) === 404)
      throw new HostLocalError(`no DaemonSet ${namespace}/${NODE_DAEMONSET}: is netplug installed in namespace ${namespace} (-n)?`);
    throw apiFailure(`reading DaemonSet ${namespace}/${NODE_DAEMONSET}`, err);
  }
}

/** The template the DaemonSet's CNI_NETWORK_CONFIG points at (any container), else netplug-config's. */
async function readTemplate(
  kube: k8s.KubeConfig,
  namespace: string,
  daemonSet: k8s.V1DaemonSet,
): Promise<{ source: string; text: string | undefined }> {
  const pod = daemonSet.spec?.template.spec;
  const containers = [...(pod?.initContainers ?? []), ...(pod?.containers ?? [])];
  const variable = containers.flatMap((container) => container.env ?? []).find((entry) => entry.name === 'CNI_NETWORK_CONFIG');
  if (variable?.value) return { source: `DaemonSet ${namespace}/${NODE_DAEMONSET} env CNI_NETWORK_CONFIG`, text: variable.value };
  const ref = variable?.valueFrom?.configMapKeyRef ?? TEMPLATE_CONFIG_MAP;
  const source = `ConfigMap ${namespace}/${ref.name} key ${ref.key}`;
  try {
    const configMap = await kube.makeApiClient(k8s.CoreV1Api).readNamespacedConfigMap({ name: ref.name ?? '', namespace });
    return { source, text: configMap.data?.[ref.key] };
  } catch (err) {
    if (statusOf(err) === 404) return { source: `${source} (no such ConfigMap)`, text: undefined };
    throw apiFailure(`reading ${source}`, err);
  }
}

const statusOf = (err: unknown) => (err instanceof k8s.ApiException ? err.code : undefined);

function messageOf(err: unknown): string {
  if (!(err instanceof k8s.ApiException)) return err instanceof Error ? err.message : String(err);
  const body = err.body as unknown;
  try {
    const status = (typeof body === 'string' ? JSON.parse(body) : body) as { message?: unknown };
    if (typeof status?.message === 'string') return status.message;
  } catch {
    // not JSON: the code says enough
  }
  return `HTTP ${err.code}`;
}

function apiFailure(doing: string, err: unknown): HostLocalError {
  const status = statusOf(err);
  return new HostLocalError(`${doing}: ${status ? `${status} ` : ''}${messageOf(err).replace(/\s+/g, ' ').trim()}`);
}
