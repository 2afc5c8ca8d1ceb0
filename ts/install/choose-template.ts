// Where the conflist template comes from, first found wins: the ConfigMap NETPLUG_CONFIG_MAP in
// the pod's namespace (key NETPLUG_CONFIG_MAP_KEY, default cni_network_config), the file CNI_NETWORK_CONFIG_FILE, the variable
// CNI_NETWORK_CONFIG, the built-in template.
import { readFile } from 'node:fs/promises';

import type * as k8s from '@kubernetes/client-node';

import { BUILTIN_TEMPLATE } from './builtin-template.ts';
import { apiStatus, describeError } from '../runtime/errors.ts';
import type { Log } from '../runtime/log.ts';
import type { KubeAccess } from './open-kube-access.ts';
import { TemplateError, type Template } from './render-conflist.ts';
import type { InstallSettings } from './settings.ts';

/** The ConfigMap's template, if it has one. */
export function templateFromConfigMap(configMap: k8s.V1ConfigMap, key: string): Template | undefined {
  const text = configMap.data?.[key];
  if (!text) return undefined;
  const { namespace, name } = configMap.metadata ?? {};
  return { text, source: `ConfigMap ${namespace}/${name} key ${key}` };
}

export async function chooseTemplate(settings: InstallSettings, kube: KubeAccess | undefined, log: Log): Promise<Template> {
  const name = settings.configMapName;
  if (name && !kube) log.warning(`NETPLUG_CONFIG_MAP ${name} is set but there is no Kubernetes API access: using the next template source`);
  if (name && kube) {
    try {
      const key = settings.configMapKey;
      const template = templateFromConfigMap(await kube.core.readNamespacedConfigMap({ name, namespace: kube.namespace }), key);
      if (template) return template;
      log.warning(`ConfigMap ${kube.namespace}/${name} has no ${key}: using the next template source`);
    } catch (err) {
      if (apiStatus(err) !== 404)
        throw new Error(`cannot read ConfigMap ${kube.namespace}/${name} (NETPLUG_CONFIG_MAP): ${describeError(err)}`);
      log.warning(`ConfigMap ${kube.namespace}/${name} (NETPLUG_CONFIG_MAP) does not exist: using the next template source`);
    }
  }
  const file = settings.env.CNI_NETWORK_CONFIG_FILE;
  if (file) {
    try {
      return { text: await readFile(file, 'utf8'), source: `CNI_NETWORK_CONFIG_FILE ${file}` };
    } catch (err) {
      throw new TemplateError(
        `cannot read the CNI network config template CNI_NETWORK_CONFIG_FILE ${file}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`,
      );
    }
  }
  if (settings.env.CNI_NETWORK_CONFIG) return { text: settings.env.CNI_NETWORK_CONFIG, source: 'CNI_NETWORK_CONFIG' };
  return { text: BUILTIN_TEMPLATE, source: 'the built-in template' };
}
