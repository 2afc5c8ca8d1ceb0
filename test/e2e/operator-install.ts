// Installing netplug through netplug-operator on the test cluster, as README "Install with the
// operator" and "Install with helm" say. As for the manifests (install.ts), only what the test
// node lays out differently is changed: the Installation's cni.binDir/confDir name the cluster's
// CNI directories, and the operator's NETPLUG_NODE_STATE_DIR / NETPLUG_CNI_LOG_FILE /
// NETPLUG_AGENT_SOCKET / NETPLUG_NETNS_DIR move netplug's node state, log, the agent's socket and
// the pod namespaces it sees into the cluster's directory.
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

import { dumpYaml, loadAllYaml } from '@kubernetes/client-node';

import { type Cluster, getJson } from '../helpers/cluster.ts';
import { eventually, type NodePaths } from './install.ts';

const ROOT = new URL('../../', import.meta.url).pathname;

/** deploy/manifests/netplug-operator.yaml with the node layout of the test cluster. */
export function operatorManifestFor(cluster: Cluster, paths: NodePaths): string {
  const objects = loadAllYaml(readFileSync(join(ROOT, 'deploy/manifests/netplug-operator.yaml'), 'utf8')) as any[];
  for (const object of objects)
    for (const container of object.spec?.template?.spec?.containers ?? [])
      for (const variable of container.env ?? []) {
        if (variable.name === 'NETPLUG_NODE_STATE_DIR') variable.value = paths.varLib;
        if (variable.name === 'NETPLUG_CNI_LOG_FILE') variable.value = paths.logFile;
        if (variable.name === 'NETPLUG_AGENT_SOCKET') variable.value = paths.agentSocket;
        if (variable.name === 'NETPLUG_NETNS_DIR') variable.value = paths.netnsDir;
      }
  const out = join(cluster.dir, 'applied-netplug-operator.yaml');
  writeFileSync(out, objects.map((object) => `---\n${dumpYaml(object)}`).join(''));
  return out;
}

/** The test cluster's CNI directories, as an Installation names them. */
export const cniDirs = (cluster: Cluster) => ({ binDir: cluster.cniBinDir, confDir: cluster.cniConfDir });

/** deploy/manifests/custom-resources.yaml with the test cluster's CNI directories. */
export function customResourcesFor(cluster: Cluster): string {
  const objects = loadAllYaml(readFileSync(join(ROOT, 'deploy/manifests/custom-resources.yaml'), 'utf8')) as any[];
  for (const object of objects) if (object.kind === 'Installation') object.spec.cni = { ...object.spec.cni, ...cniDirs(cluster) };
  const out = join(cluster.dir, 'applied-custom-resources.yaml');
  writeFileSync(out, objects.map((object) => `---\n${dumpYaml(object)}`).join(''));
  return out;
}

/** A NetplugStatus condition's state (`True`, `False`, or undefined when absent). */
export async function statusCondition(
  cluster: Cluster,
  name: string,
  type: string,
): Promise<{ status?: string; message?: string; observedGeneration?: number }> {
  const status = await getJson(cluster, 'netplugstatus', name).catch(() => undefined);
  return status?.status?.conditions?.find((condition: any) => condition.type === type) ?? {};
}

/**
 * Both NetplugStatuses Available, computed from the Installation's current generation: a
 * condition from before the last change of the Installation says nothing about its rollout.
 * (The previous release's operator records no generation on its conditions: taken as they are.)
 */
export const waitAvailable = (cluster: Cluster, seconds = 240) =>
  eventually(
    'NetplugStatus netplug and ippools Available for the current Installation',
    async () => {
      const generation = (await getJson(cluster, 'installation', 'default')).metadata.generation;
      for (const name of ['netplug', 'ippools']) {
        const available = await statusCondition(cluster, name, 'Available');
        const stale = available.observedGeneration !== undefined && available.observedGeneration !== generation;
        if (available.status !== 'True' || stale)
          throw new Error(`${name}: ${JSON.stringify(available)} (Installation generation ${generation})`);
      }
      return true;
    },
    seconds,
  );

/** A Deployment of `replicas` busybox pods (`spread`: evenly over the nodes); resolves to the Running pods once all are. */
export async function runPods(cluster: Cluster, name: string, image: string, replicas: number, spread = false): Promise<any[]> {
  await cluster.kubectl('create', 'deployment', name, `--image=${image}`, `--replicas=${replicas}`, '--', 'sleep', '3600');
  const patch: { op: string; path: string; value: unknown }[] = [
    { op: 'add', path: '/spec/template/spec/containers/0/imagePullPolicy', value: 'Never' },
    { op: 'add', path: '/spec/template/spec/terminationGracePeriodSeconds', value: 1 },
  ];
  // At most one pod more on one node than on another, whatever the scheduler's scores say.
  if (spread)
    patch.push({
      op: 'add',
      path: '/spec/template/spec/topologySpreadConstraints',
      value: [
        {
          maxSkew: 1,
          topologyKey: 'kubernetes.io/hostname',
          whenUnsatisfiable: 'DoNotSchedule',
          labelSelector: { matchLabels: { app: name } },
        },
      ],
    });
  await cluster.kubectl('patch', 'deployment', name, '--type=json', '-p', JSON.stringify(patch));
  return eventually(
    `${replicas} pods of ${name} Running`,
    async () => {
      const items = (await getJson(cluster, 'pods', '-l', `app=${name}`)).items.filter(
        (pod: any) => pod.status.phase === 'Running' && pod.status.podIP && !pod.metadata.deletionTimestamp,
      );
      return items.length === replicas ? items : undefined;
    },
    300,
  );
}
